CREATE TABLE `workflow_instances` (
	`tenant_id` text NOT NULL,
	`instance_id` text NOT NULL,
	`workflow` text NOT NULL,
	`subject` text NOT NULL,
	`start_fact_id` text NOT NULL,
	`status` text NOT NULL,
	`step` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`waiting_for` text,
	`wait_until` text,
	`facts` text DEFAULT '[]' NOT NULL,
	`error` text,
	`traceparent` text,
	`started_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `instance_id`)
);
--> statement-breakpoint
CREATE INDEX `workflow_instances_by_tenant_updated` ON `workflow_instances` (`tenant_id`,`updated_at`);--> statement-breakpoint
CREATE INDEX `workflow_instances_by_updated` ON `workflow_instances` (`updated_at`);