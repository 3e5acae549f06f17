CREATE TABLE `accepted_keys` (
	`tenant_id` text NOT NULL,
	`idempotency_key` text NOT NULL,
	`payload_hash` text NOT NULL,
	`message_type` text NOT NULL,
	`subject` text NOT NULL,
	`accepted_at` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `idempotency_key`)
);
--> statement-breakpoint
CREATE INDEX `accepted_keys_by_accepted_at` ON `accepted_keys` (`accepted_at`);