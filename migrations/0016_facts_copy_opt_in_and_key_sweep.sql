CREATE TABLE `sweep_cursors` (
	`sweep` text PRIMARY KEY NOT NULL,
	`after` text,
	`pass_started_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
DROP INDEX `accepted_keys_by_accepted_at`;--> statement-breakpoint
DROP INDEX `facts_by_stream`;