// Types of the Longhaul client. The wire shapes mirror the server's
// OpenAPI document (GET /v1/openapi.json); fields the server adds later
// pass through untouched.

export type SessionStatus =
  | 'queued' | 'running' | 'requires_action' | 'waiting' | 'idle' | 'failed' | 'cancelled' | 'paused';
export type ActionType = 'approval' | 'function_call' | 'input' | 'in_doubt' | 'budget' | 'environment_connection' | 'monitor' | (string & {});
export type ActionStatus = 'pending' | 'resolved' | 'cancelled';

export interface Budget {
  max_cost_usd?: number; soft_cost_usd?: number;
  max_tokens?: number; soft_tokens?: number;
  max_model_calls?: number; soft_model_calls?: number;
  max_tool_calls?: number; soft_tool_calls?: number;
  max_wall_seconds?: number; soft_wall_seconds?: number;
}

export interface Usage {
  input_tokens: number; cached_input_tokens?: number; output_tokens: number; reasoning_tokens?: number;
  cost_usd: number; model_calls: number; tool_calls: number;
  /** The part of cost_usd the model monitor's calls cost. */
  monitor_cost_usd?: number;
  /** Set when a token count is an estimate (the provider reported none). */
  estimated?: boolean;
}

export interface Actor { key_id?: string; name: string; role: string }

export interface Action {
  id: string; session_id: string; type: ActionType; status: ActionStatus; turn_id: string;
  step?: number; call_id?: string; tool?: string; arguments?: unknown; arguments_sha256?: string;
  effect_id?: string; idempotency_key?: string; summary?: string; affects?: string[] | null;
  evidence?: string[] | null; consequence?: string; question?: string; choices?: string[] | null;
  created_at: string; expires_at: string | null; resolved_at?: string | null; resolution?: unknown;
  resolved_by?: Actor | null;
  /** environment_connection: the runner it waits for, and why none can be reached. */
  runner?: { name?: string; labels?: string[] }; reason?: string;
  /** monitor: the trajectory monitor's finding it asks about (decide with continue or stop). */
  finding?: MonitorFinding | null;
  /** monitor: the model monitor's review that paused (decide with continue or stop). */
  review?: MonitorReview | null;
  [field: string]: unknown;
}

/** The data of a monitor.finding event: never a secret's value or a fragment of one. */
export interface MonitorFinding {
  detector: string; severity: 'low' | 'medium' | 'high'; summary: string;
  /** The seqs of the events that show it. */
  evidence: number[] | null; action: 'log' | 'ask' | 'stop';
  /** A finding the tree's sessions made together: the other sessions' events that show it. */
  tree_evidence?: { session_id: string; seq: number }[];
}

/** The data of a monitor.reviewed event: the model monitor's verdict on the trajectory. */
export interface MonitorReview {
  trigger: 'every_steps' | 'before'; step: number; call_id?: string; tool?: string;
  verdict: 'ok' | 'warn' | 'pause'; reasons?: string[] | null;
  /** Set when the monitor gave no usable verdict: the pause is the engine's, failing closed. */
  failed?: boolean;
  /** The redacted trajectory summary the monitor read (empty on an action). */
  prompt: string; provider: string; model?: string; usage: Usage; cost_usd: number; duration_ms: number;
}

export interface Session {
  id: string; project: string; status: SessionStatus; agent: { name: string; version: number };
  input?: string; goal: string; constraints: string[] | null; acceptance_criteria: string[] | null;
  budget: Budget; usage: Usage; parent_id: string | null; current_turn_id: string;
  last_checkpoint: string | null; required_actions: Action[] | null; stop_reason: string | null;
  cancel_requested: boolean; review: { accepted: boolean; note?: string; at: string } | null;
  last_event_seq: number; created_at: string; updated_at: string; metadata: unknown;
  webhook_url?: string; webhook_secret?: string; pause_requested: boolean;
  [field: string]: unknown;
}

export interface Turn {
  id: string; session_id: string; index: number; status: string; input: string; output?: string;
  stop_reason: string | null; steps: number; usage: Usage; created_at: string;
  started_at: string | null; completed_at: string | null;
  [field: string]: unknown;
}

export interface Event {
  seq: number; type: string; time: string; session_id: string; turn_id?: string; step?: number;
  worker_id?: string; data: any;
}

export interface Page<T> { data: T[]; next_cursor: string | null }

export interface ToolSpec { name: string; type?: string; effect?: string; parameters?: unknown; [field: string]: unknown }
export interface AgentSpec {
  model: { provider: string; name?: string; [field: string]: unknown };
  instructions?: string; tools?: ToolSpec[]; policies?: Array<Record<string, unknown>>;
  [field: string]: unknown;
}

export interface CreateSessionRequest {
  agent?: string; agent_spec?: AgentSpec; input: string; goal?: string; constraints?: string[];
  acceptance_criteria?: string[]; budget?: Budget; metadata?: unknown; webhook_url?: string; project?: string;
}

export interface Decision {
  decision?: string; arguments?: unknown; reason?: string; output?: unknown; error?: string;
  answer?: string; budget?: Budget; [field: string]: unknown;
}

export interface ErrorExtra { field?: string | null; retryAfter?: number | null; requestId?: string | null }

export class LonghaulError extends Error {
  constructor(status: number, code: string, message: string, extra?: ErrorExtra);
  /** HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The API's error code: not_found, conflict, invalid_request… */
  readonly code: string;
  /** The server's message, without the code. */
  readonly apiMessage: string;
  /** The request field at fault, if any. */
  readonly field: string | null;
  /** Seconds to wait (429). */
  readonly retryAfter: number | null;
  readonly requestId: string | null;
}
export class InvalidRequestError extends LonghaulError {}
export class UnauthorizedError extends LonghaulError {}
export class ForbiddenError extends LonghaulError {}
export class NotFoundError extends LonghaulError {}
export class ConflictError extends LonghaulError {}
export class PayloadTooLargeError extends LonghaulError {}
export class RateLimitedError extends LonghaulError {}
export class ServerError extends LonghaulError {}
export class ConnectionFailedError extends LonghaulError {}
export function errorFor(status: number, code: string, message: string, extra?: ErrorExtra): LonghaulError;

export interface ClientOptions {
  /** The server's address, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /** Bearer token; omit for a server without keys (loopback only). */
  apiKey?: string;
  /** A fetch implementation; default globalThis.fetch. */
  fetch?: typeof fetch;
}

export class Client {
  constructor(options: ClientOptions);
  readonly baseUrl: string;
  request<T = unknown>(method: string, path: string, options?: {
    body?: unknown; query?: Record<string, unknown>; idempotencyKey?: string; signal?: AbortSignal;
  }): Promise<T>;

  createSession(body: CreateSessionRequest, options?: { idempotencyKey?: string }): Promise<Session>;
  getSession(id: string, options?: { includeSubagents?: boolean }): Promise<Session>;
  listSessions(filters?: { status?: SessionStatus; agent?: string; parentId?: string; limit?: number; cursor?: string }): Promise<Page<Session>>;
  iterSessions(filters?: { status?: SessionStatus; agent?: string; parentId?: string; limit?: number }): AsyncGenerator<Session>;
  send(id: string, input: string, options?: { idempotencyKey?: string }): Promise<Turn>;
  cancel(id: string, reason?: string): Promise<Session>;

  listActions(id: string, filters?: { status?: ActionStatus }): Promise<Page<Action>>;
  inbox(filters?: { status?: ActionStatus | null; type?: ActionType; sessionId?: string; limit?: number; cursor?: string }): Promise<Page<Action>>;
  getAction(actionId: string): Promise<Action>;
  decide(id: string, actionId: string, body: Decision, options?: { idempotencyKey?: string }): Promise<Action>;
  approve(id: string, actionId: string, options?: { arguments?: unknown }): Promise<Action>;
  reject(id: string, actionId: string, reason: string): Promise<Action>;
  submitOutput(id: string, actionId: string, output: unknown, options?: { error?: string }): Promise<Action>;

  listEvents(id: string, options?: { after?: number; limit?: number }): Promise<Page<Event>>;
  streamEvents(id: string, options?: { after?: number; maxRetries?: number; signal?: AbortSignal }): AsyncGenerator<Event>;

  me(): Promise<{ key_id?: string; name: string; role: string; project: string; permissions: string[] | null }>;
  openapi(): Promise<Record<string, unknown>>;
}
