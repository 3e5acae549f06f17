CREATE TABLE `facts` (
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
	PRIMARY KEY(`tenant_id`, `fact_id`)
);
--> statement-breakpoint
CREATE INDEX `facts_by_tenant_time` ON `facts` (`tenant_id`,`created_at`,`fact_id`);--> statement-breakpoint
CREATE INDEX `facts_by_stream` ON `facts` (`tenant_id`,`stream`,`sequence`);--> statement-breakpoint
CREATE INDEX `facts_by_type` ON `facts` (`tenant_id`,`type`,`created_at`,`fact_id`);--> statement-breakpoint
CREATE TABLE `ledger_shards` (
	`shard_key` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`registered_at` text NOT NULL,
	`relay_pending_since` text,
	`last_relayed_at` text
);
--> statement-breakpoint
CREATE INDEX `ledger_shards_by_pending` ON `ledger_shards` (`relay_pending_since`);--> statement-breakpoint
CREATE TABLE `projection_applied` (
	`projection` text NOT NULL,
	`fact_id` text NOT NULL,
	PRIMARY KEY(`projection`, `fact_id`)
);
--> statement-breakpoint
CREATE TABLE `projection_rebuilds` (
	`id` text PRIMARY KEY NOT NULL,
	`projection` text NOT NULL,
	`shadow_table` text NOT NULL,
	`status` text NOT NULL,
	`shards_total` integer NOT NULL,
	`shards_done` integer DEFAULT 0 NOT NULL,
	`facts_replayed` integer DEFAULT 0 NOT NULL,
	`error` text,
	`started_at` text NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE INDEX `projection_rebuilds_by_status` ON `projection_rebuilds` (`status`,`projection`);--> statement-breakpoint
CREATE TABLE `buyer_budgets` (
	`tenant_id` text NOT NULL,
	`buyer_id` text NOT NULL,
	`spent_cents` integer DEFAULT 0 NOT NULL,
	`charges` integer DEFAULT 0 NOT NULL,
	`refunds` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`tenant_id`, `buyer_id`)
);
--> statement-breakpoint
CREATE TABLE `calls` (
	`tenant_id` text NOT NULL,
	`call_id` text NOT NULL,
	`buyer_id` text,
	`duration_s` integer,
	`currency` text,
	`qualified` integer,
	`charged_cents` integer DEFAULT 0 NOT NULL,
	`refunded_cents` integer DEFAULT 0 NOT NULL,
	`outcome_seq` integer,
	`qualification_seq` integer,
	`charge_seq` integer,
	`refund_seq` integer,
	PRIMARY KEY(`tenant_id`, `call_id`)
);
--> statement-breakpoint
CREATE INDEX `calls_by_buyer` ON `calls` (`tenant_id`,`buyer_id`);