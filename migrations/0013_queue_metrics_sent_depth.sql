ALTER TABLE `queue_metrics` ADD `dead_lettered_by_reason` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE `queue_metrics` ADD `sent` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `queue_metrics` ADD `depth_max` integer;