CREATE TABLE `dead_messages` (
	`id` text PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`reason` text NOT NULL,
	`last_error` text NOT NULL,
	`attempts` integer NOT NULL,
	`first_attempted_at` text NOT NULL,
	`last_attempted_at` text NOT NULL,
	`tenant_id` text,
	`message_type` text,
	`idempotency_key` text,
	`original_message` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`received_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `dead_messages_by_queue_status` ON `dead_messages` (`queue`,`status`,`received_at`);--> statement-breakpoint
CREATE INDEX `dead_messages_by_tenant` ON `dead_messages` (`tenant_id`);--> statement-breakpoint
CREATE TABLE `inbox` (
	`queue` text NOT NULL,
	`idempotency_key` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_error` text,
	`first_seen_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`queue`, `idempotency_key`)
);
--> statement-breakpoint
CREATE INDEX `inbox_by_updated_at` ON `inbox` (`updated_at`);