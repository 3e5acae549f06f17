CREATE TABLE `projection_placements` (
	`tenant_id` text NOT NULL,
	`projection` text NOT NULL,
	`database` integer NOT NULL,
	`placed_at` text NOT NULL,
	`frozen_since` text,
	PRIMARY KEY(`tenant_id`, `projection`)
);
--> statement-breakpoint
ALTER TABLE `tenant_moves` ADD `projection` text;