/**
 * @factline/core/testing — the test kit, for plain Node (≥ 22.13):
 * specifications for deciders, handlers, processors, projections and workflows, the
 * registry check of an app's module list (`RegistrySpec`), builders
 * for messages and facts, the in-memory platform they run on, and the check
 * that every projection has a migration (`checkMigrations`). The
 * counting wrappers for workerd tests are in `@factline/core/testing/bindings`.
 */
export { DeciderSpec, HandlerSpec, ProcessorSpec, ProjectionSpec, SpecError } from "./Specs.js"
export { WorkflowSpec, type Expected as WorkflowExpected, type ServiceCall, type WorkflowResult } from "./WorkflowSpec.js"
export { MemoryStep } from "./MemoryStep.js"
export { defaultTenant, fact, message, type FactOptions, type MessageOptions } from "./Builders.js"
export * as TestPlatform from "./TestPlatform.js"
export * as RegistrySpec from "./RegistrySpec.js"
export * as PropertySpec from "./PropertySpec.js"
export * as MemoryBindings from "./MemoryBindings.js"
export { createTable } from "./Ddl.js"
export { checkSchemaSnapshots, type Options as SchemaSnapshotOptions } from "./Snapshots.js"
export { checkMigrations, unmigrated, type Unmigrated } from "./Migrations.js"
