CREATE TABLE `ledger_reshards` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`from_shards` integer NOT NULL,
	`to_shards` integer NOT NULL,
	`phase` text NOT NULL,
	`shard` integer DEFAULT 0 NOT NULL,
	`stage` text DEFAULT 'hold' NOT NULL,
	`progress` text DEFAULT '{}' NOT NULL,
	`error` text,
	`started_by` text NOT NULL,
	`started_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE INDEX `ledger_reshards_by_tenant` ON `ledger_reshards` (`tenant_id`,`started_at`);--> statement-breakpoint
ALTER TABLE `ledger_tenants` ADD `resharding_to` integer;--> statement-breakpoint
ALTER TABLE `ledger_tenants` ADD `shards_switched` integer DEFAULT 0 NOT NULL;