/**
 * ratekeeper's decision service, embeddable: load rules, decide without a transport, or run the
 * whole service (HTTP + Envoy RLS gRPC).
 * @example
 * import { startService } from "@ratekeeper/server";
 * const svc = await startService({ configFile: "examples/rules.yaml", port: 0, grpcPort: 0 });
 */
export { compileRules } from "./config/compile.js";
export { RulesError, type Rules, type Rule, type NamedPolicy, type CompiledPolicy } from "./config/rules.js";
export { loadRulesFile, parseRules } from "./config/load.js";
export { watchRules, RELOAD_DEFAULTS, type WatchRulesOptions } from "./config/reload.js";
export { matchDescriptor, type DescriptorEntry, type Match } from "./config/match.js";
export { descriptorKey, parseDescriptorKey, splitStateKey, stateKey } from "./service/descriptor-key.js";
export { DecisionService, type DecisionServiceOptions } from "./service/decide.js";
export {
  CheckError,
  StoreFailure,
  type CheckInput,
  type CheckResult,
  type DescriptorStatus,
  type Explain,
  type DecisionObserver,
  type CallerLimit,
} from "./service/types.js";
export { Metrics } from "./metrics.js";
export { createHttpServer, type HttpOptions } from "./transport/http.js";
export { limitHeaders, resultJson } from "./transport/render.js";
export {
  createAdminHandler,
  ADMIN_PREFIX,
  type AdminContext,
  type AdminHandler,
  type AdminLimiters,
  type AdminAuditEntry,
} from "./transport/admin.js";
export { createGrpcServer, loadRlsDefinition, PROTO_DIR, RLS_PROTO } from "./transport/grpc.js";
export { startService, type ServeOptions, type RunningService, type ServiceOverrides } from "./server.js";
// Per-key overrides: stores, cache, import/export, admin handler (owned by the overrides module).
export * from "./overrides/index.js";
