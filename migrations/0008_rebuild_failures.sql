ALTER TABLE `projection_rebuilds` ADD `facts_failed` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `projection_rebuilds` ADD `first_failure` text;