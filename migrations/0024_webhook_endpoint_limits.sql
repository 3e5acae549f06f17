ALTER TABLE `webhook_attempts` ADD `throttled` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `max_per_second` integer;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `max_in_flight` integer;