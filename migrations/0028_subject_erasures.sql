CREATE TABLE `subject_erasures` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`subject` text NOT NULL,
	`phase` text NOT NULL,
	`progress` text DEFAULT '{}' NOT NULL,
	`report` text,
	`error` text,
	`requested_by` text NOT NULL,
	`started_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE INDEX `subject_erasures_by_subject` ON `subject_erasures` (`tenant_id`,`subject`,`started_at`);--> statement-breakpoint
ALTER TABLE `dead_messages` ADD `data_subject` text;--> statement-breakpoint
CREATE INDEX `dead_messages_by_data_subject` ON `dead_messages` (`tenant_id`,`data_subject`) WHERE data_subject IS NOT NULL;--> statement-breakpoint
ALTER TABLE `runs` ADD `data_subject` text;--> statement-breakpoint
CREATE INDEX `runs_by_data_subject` ON `runs` (`tenant_id`,`data_subject`) WHERE data_subject IS NOT NULL;--> statement-breakpoint
ALTER TABLE `webhook_attempts` ADD `data_subject` text;--> statement-breakpoint
CREATE INDEX `webhook_attempts_by_data_subject` ON `webhook_attempts` (`tenant_id`,`data_subject`) WHERE data_subject IS NOT NULL;