ALTER TABLE `workflow_instances` ADD `alert_id` text;--> statement-breakpoint
ALTER TABLE `workflow_instances` ADD `alerted_at` text;--> statement-breakpoint
CREATE INDEX `workflow_instances_failed` ON `workflow_instances` (`updated_at`) WHERE status = 'failed';--> statement-breakpoint
CREATE INDEX `workflow_instances_by_alert` ON `workflow_instances` (`alert_id`);