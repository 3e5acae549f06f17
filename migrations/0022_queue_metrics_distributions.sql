ALTER TABLE `queue_metrics` ADD `batch_size_histogram` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `queue_metrics` ADD `depth_by_group` text DEFAULT '{}' NOT NULL;