CREATE TABLE `tenant_deletions` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`phase` text NOT NULL,
	`progress` text DEFAULT '{}' NOT NULL,
	`report` text,
	`error` text,
	`started_by` text NOT NULL,
	`started_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE INDEX `tenant_deletions_by_tenant` ON `tenant_deletions` (`tenant_id`,`started_at`);