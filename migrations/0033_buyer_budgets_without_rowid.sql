-- Custom migration (drizzle-kit generate --custom): the example's `buyer_budgets` projection (additive: every
-- charge and refund updates it) rebuilt WITHOUT ROWID, as 0011 did for `calls` (Drizzle's schema cannot say it).
-- Stored in its primary key's b-tree, a new buyer's row is one row written instead of two (the rowid table and
-- the primary key's automatic index; measured on local D1, test/d1-rows.workers.test.ts). Columns and key exactly
-- those of apps/example/src/calls/Tables.ts; a rebuild's shadow copies this DDL, so it stays WITHOUT ROWID.
CREATE TABLE `__new_buyer_budgets` (
	`tenant_id` text NOT NULL,
	`buyer_id` text NOT NULL,
	`spent_cents` integer DEFAULT 0 NOT NULL,
	`charges` integer DEFAULT 0 NOT NULL,
	`refunds` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`tenant_id`, `buyer_id`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_buyer_budgets` SELECT `tenant_id`, `buyer_id`, `spent_cents`, `charges`, `refunds` FROM `buyer_budgets`;--> statement-breakpoint
DROP TABLE `buyer_budgets`;--> statement-breakpoint
ALTER TABLE `__new_buyer_budgets` RENAME TO `buyer_budgets`;
