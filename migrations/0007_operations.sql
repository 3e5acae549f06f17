CREATE TABLE `queue_metrics` (
	`queue` text NOT NULL,
	`minute` text NOT NULL,
	`batches` integer DEFAULT 0 NOT NULL,
	`received` integer DEFAULT 0 NOT NULL,
	`acked` integer DEFAULT 0 NOT NULL,
	`retried` integer DEFAULT 0 NOT NULL,
	`dead_lettered` integer DEFAULT 0 NOT NULL,
	`duration_ms_sum` integer DEFAULT 0 NOT NULL,
	`duration_ms_max` integer DEFAULT 0 NOT NULL,
	`batch_size_max` integer DEFAULT 0 NOT NULL,
	`lag_histogram` text DEFAULT '[]' NOT NULL,
	`duration_histogram` text DEFAULT '[]' NOT NULL,
	PRIMARY KEY(`queue`, `minute`)
);
--> statement-breakpoint
CREATE INDEX `queue_metrics_by_minute` ON `queue_metrics` (`minute`);--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_dead_messages` (
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
	`subject` text,
	`original_message` text NOT NULL,
	`status` text DEFAULT 'open' NOT NULL,
	`received_at` text NOT NULL,
	`resolved_by` text,
	`resolved_at` text,
	`replay_operation_id` text,
	`history` text DEFAULT '[]' NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_dead_messages`("id", "queue", "reason", "last_error", "attempts", "first_attempted_at", "last_attempted_at", "tenant_id", "message_type", "idempotency_key", "subject", "original_message", "status", "received_at", "history") SELECT "id", "queue", "reason", "last_error", "attempts", "first_attempted_at", "last_attempted_at", "tenant_id", "message_type", "idempotency_key", json_extract("original_message", '$.subject'), "original_message", CASE "status" WHEN 'pending' THEN 'open' ELSE "status" END, "received_at", '[]' FROM `dead_messages`;--> statement-breakpoint
DROP TABLE `dead_messages`;--> statement-breakpoint
ALTER TABLE `__new_dead_messages` RENAME TO `dead_messages`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `dead_messages_by_queue_status` ON `dead_messages` (`queue`,`status`,`received_at`);--> statement-breakpoint
CREATE INDEX `dead_messages_by_tenant` ON `dead_messages` (`tenant_id`,`status`,`received_at`);--> statement-breakpoint
CREATE INDEX `dead_messages_by_resolved_at` ON `dead_messages` (`resolved_at`);