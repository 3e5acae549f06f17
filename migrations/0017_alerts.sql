CREATE TABLE `alert_state` (
	`key` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`changed_at` text NOT NULL,
	`sent_state` text,
	`sent_at` text,
	`version` integer DEFAULT 0 NOT NULL,
	`pending` text,
	`pending_since` text
);
--> statement-breakpoint
ALTER TABLE `dead_messages` ADD `alert_id` text;--> statement-breakpoint
CREATE INDEX `dead_messages_not_alerted` ON `dead_messages` (`received_at`) WHERE alert_id IS NULL;--> statement-breakpoint
CREATE INDEX `dead_messages_by_alert` ON `dead_messages` (`alert_id`);--> statement-breakpoint
-- Dead letters stored before alerts existed are not announced as new by the first evaluation.
UPDATE `dead_messages` SET `alert_id` = 'before-alerts' WHERE `alert_id` IS NULL;
