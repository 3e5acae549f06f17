CREATE TABLE `projection_versions` (
	`projection` text PRIMARY KEY NOT NULL,
	`version` integer NOT NULL,
	`status` text NOT NULL,
	`rebuild_id` text,
	`detail` text,
	`updated_at` text NOT NULL
);
