CREATE TABLE `webhook_attempts` (
	`tenant_id` text NOT NULL,
	`endpoint_id` text NOT NULL,
	`attempted_at` text NOT NULL,
	`delivery_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`event_type` text NOT NULL,
	`fact_id` text NOT NULL,
	`succeeded` integer NOT NULL,
	`status_code` integer,
	`duration_ms` integer NOT NULL,
	`response_snippet` text,
	`error` text,
	PRIMARY KEY(`tenant_id`, `endpoint_id`, `attempted_at`, `delivery_id`, `attempt`)
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`tenant_id` text NOT NULL,
	`delivery_id` text NOT NULL,
	`endpoint_id` text NOT NULL,
	`fact_id` text NOT NULL,
	`event_type` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_status_code` integer,
	`last_attempted_at` text,
	`message` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `delivery_id`)
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_by_endpoint` ON `webhook_deliveries` (`tenant_id`,`endpoint_id`,`status`,`last_attempted_at`);--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`tenant_id` text NOT NULL,
	`id` text NOT NULL,
	`url` text NOT NULL,
	`description` text,
	`event_types` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`version` integer DEFAULT 1 NOT NULL,
	`secret_sealed` text NOT NULL,
	`previous_secret_sealed` text,
	`previous_secret_expires_at` text,
	`disabled_reason` text,
	`failing_since` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `id`)
);
