ALTER TABLE `projection_placements` ADD `parts` text;--> statement-breakpoint
ALTER TABLE `tenant_moves` ADD `parts` text;