CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`message_id` text NOT NULL,
	`tenant_id` text,
	`message_type` text,
	`subject` text,
	`idempotency_key` text,
	`trace_id` text,
	`attempt` integer NOT NULL,
	`attempts` integer DEFAULT 1 NOT NULL,
	`outcome` text NOT NULL,
	`error` text,
	`next_retry_at` text,
	`body` text,
	`first_attempted_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `runs_by_updated_at` ON `runs` (`updated_at`);--> statement-breakpoint
CREATE INDEX `runs_by_tenant` ON `runs` (`tenant_id`,`updated_at`);