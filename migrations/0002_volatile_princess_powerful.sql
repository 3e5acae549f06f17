CREATE TABLE `ledger_tenants` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`shard_count` integer NOT NULL,
	`first_seen_at` text NOT NULL
);
