-- Custom migration (drizzle-kit generate --custom): the example's `calls` projection, written on every
-- event, rebuilt WITHOUT ROWID (Drizzle's schema cannot say it). Stored in its primary key's b-tree, a new
-- call is two rows written (the row, the by-buyer index) instead of three (the rowid table, the primary
-- key's automatic index, the by-buyer index). Columns, key and index exactly those of
-- apps/example/src/calls/Tables.ts; a rebuild's shadow copies this DDL, so it stays WITHOUT ROWID.
CREATE TABLE `__new_calls` (
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
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_calls` SELECT `tenant_id`, `call_id`, `buyer_id`, `duration_s`, `currency`, `qualified`, `charged_cents`, `refunded_cents`, `outcome_seq`, `qualification_seq`, `charge_seq`, `refund_seq` FROM `calls`;--> statement-breakpoint
DROP TABLE `calls`;--> statement-breakpoint
ALTER TABLE `__new_calls` RENAME TO `calls`;--> statement-breakpoint
CREATE INDEX `calls_by_buyer` ON `calls` (`tenant_id`,`buyer_id`);
