CREATE TABLE `ledger_tenants` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`shard_count` integer NOT NULL,
	`first_seen_at` text NOT NULL
);
--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
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
);
--> statement-breakpoint
INSERT INTO `__new_facts`("tenant_id", "fact_id", "stream", "sequence", "type", "body", "causation_id", "correlation_id", "caused_by", "created_at") SELECT "tenant_id", "fact_id", "stream", "sequence", "type", "body", "causation_id", "correlation_id", "caused_by", "created_at" FROM `facts`;--> statement-breakpoint
DROP TABLE `facts`;--> statement-breakpoint
ALTER TABLE `__new_facts` RENAME TO `facts`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `facts_by_stream` ON `facts` (`tenant_id`,`stream`,`created_at`,`fact_id`);