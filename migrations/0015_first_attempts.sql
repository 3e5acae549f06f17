CREATE TABLE `first_attempts` (
	`queue` text NOT NULL,
	`message_id` text NOT NULL,
	`first_attempted_at` text NOT NULL,
	PRIMARY KEY(`queue`, `message_id`)
);
--> statement-breakpoint
CREATE INDEX `first_attempts_by_first_attempted_at` ON `first_attempts` (`first_attempted_at`);