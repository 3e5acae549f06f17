CREATE TABLE `batch_jobs` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`operation` text NOT NULL,
	`status` text NOT NULL,
	`params` text DEFAULT '{}' NOT NULL,
	`input_key` text,
	`output_key` text,
	`total` integer,
	`offset` integer DEFAULT 0 NOT NULL,
	`cursor` integer DEFAULT 0 NOT NULL,
	`chunks_done` integer DEFAULT 0 NOT NULL,
	`succeeded` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`errors` text DEFAULT '[]' NOT NULL,
	`error` text,
	`created_at` text NOT NULL,
	`started_at` text,
	`finished_at` text,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `batch_jobs_by_tenant` ON `batch_jobs` (`tenant_id`,`created_at`,`id`);