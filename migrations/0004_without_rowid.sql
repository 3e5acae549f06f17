-- Custom migration (drizzle-kit generate --custom): Drizzle's schema cannot say WITHOUT ROWID, so the tables
-- written on every event are rebuilt by hand. A WITHOUT ROWID table is stored in its primary key's b-tree:
-- one row written per insert instead of two (the rowid table plus the primary key's automatic index).
-- The columns, keys and indexes are exactly those of PlatformTables.ts. Measured by `npm run bench`.
CREATE TABLE `__new_facts` (
	`tenant_id` text NOT NULL,
	`fact_id` text NOT NULL,
	`stream` text NOT NULL,
	`sequence` integer NOT NULL,
	`type` text NOT NULL,
	`body` text NOT NULL,
	`causation_id` text NOT NULL,
	`correlation_id` text NOT NULL,
	`caused_by` text NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `created_at`, `fact_id`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_facts` SELECT `tenant_id`, `fact_id`, `stream`, `sequence`, `type`, `body`, `causation_id`, `correlation_id`, `caused_by`, `created_at` FROM `facts`;--> statement-breakpoint
DROP TABLE `facts`;--> statement-breakpoint
ALTER TABLE `__new_facts` RENAME TO `facts`;--> statement-breakpoint
CREATE INDEX `facts_by_stream` ON `facts` (`tenant_id`,`stream`,`created_at`,`fact_id`);--> statement-breakpoint
CREATE TABLE `__new_projection_applied` (
	`projection` text NOT NULL,
	`fact_id` text NOT NULL,
	PRIMARY KEY(`projection`, `fact_id`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_projection_applied` SELECT `projection`, `fact_id` FROM `projection_applied`;--> statement-breakpoint
DROP TABLE `projection_applied`;--> statement-breakpoint
ALTER TABLE `__new_projection_applied` RENAME TO `projection_applied`;--> statement-breakpoint
CREATE TABLE `__new_accepted_keys` (
	`tenant_id` text NOT NULL,
	`idempotency_key` text NOT NULL,
	`payload_hash` text NOT NULL,
	`message_type` text NOT NULL,
	`subject` text NOT NULL,
	`accepted_at` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `idempotency_key`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_accepted_keys` SELECT `tenant_id`, `idempotency_key`, `payload_hash`, `message_type`, `subject`, `accepted_at` FROM `accepted_keys`;--> statement-breakpoint
DROP TABLE `accepted_keys`;--> statement-breakpoint
ALTER TABLE `__new_accepted_keys` RENAME TO `accepted_keys`;--> statement-breakpoint
CREATE INDEX `accepted_keys_by_accepted_at` ON `accepted_keys` (`accepted_at`);
