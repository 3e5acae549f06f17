CREATE TABLE `tenant_moves` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`from_database` integer NOT NULL,
	`to_database` integer NOT NULL,
	`phase` text NOT NULL,
	`copied` text DEFAULT '{}' NOT NULL,
	`verified` text,
	`error` text,
	`started_by` text NOT NULL,
	`started_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE INDEX `tenant_moves_by_tenant` ON `tenant_moves` (`tenant_id`,`started_at`);--> statement-breakpoint
CREATE TABLE `tenant_placements` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`database` integer NOT NULL,
	`placed_at` text NOT NULL,
	`frozen_since` text
);
--> statement-breakpoint
CREATE INDEX `tenant_placements_by_database` ON `tenant_placements` (`database`);