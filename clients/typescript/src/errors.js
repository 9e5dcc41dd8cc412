// Typed errors of the Longhaul HTTP API. Every error the server answers is
// {"error": {"code", "message", "field"}} with the HTTP status of its code;
// the client throws the subclass of LonghaulError for that code.

/** An error answered by the server (or the transport to it). */
export class LonghaulError extends Error {
  /**
   * @param {number} status HTTP status (0 when no answer came)
   * @param {string} code the API's error code (not_found, conflict…)
   * @param {string} message what went wrong
   * @param {{field?: string|null, retryAfter?: number|null, requestId?: string|null}} [extra]
   */
  constructor(status, code, message, extra = {}) {
    let text = code ? `${code}: ${message}` : message;
    if (extra.field) text += ` (field ${extra.field})`;
    super(text);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.apiMessage = message;
    this.field = extra.field ?? null;
    this.retryAfter = extra.retryAfter ?? null;
    this.requestId = extra.requestId ?? null;
  }
}

/** 400 invalid_request: the request was wrong; `field` names where. */
export class InvalidRequestError extends LonghaulError {}
/** 401 unauthorized: no API key, or an unknown or revoked one. */
export class UnauthorizedError extends LonghaulError {}
/** 403 forbidden: the key's role or project may not do this. */
export class ForbiddenError extends LonghaulError {}
/** 404 not_found. */
export class NotFoundError extends LonghaulError {}
/** 409 conflict: the state does not allow it. */
export class ConflictError extends LonghaulError {}
/** 413 payload_too_large. */
export class PayloadTooLargeError extends LonghaulError {}
/** 429 rate_limited: `retryAfter` says for how long (seconds). */
export class RateLimitedError extends LonghaulError {}
/** 5xx: internal, unavailable, insufficient_storage. Worth retrying later. */
export class ServerError extends LonghaulError {}
/** No answer: the server could not be reached, or the connection broke. */
export class ConnectionFailedError extends LonghaulError {}

const byCode = {
  invalid_request: InvalidRequestError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  rate_limited: RateLimitedError,
};

const byStatus = {
  400: InvalidRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  405: InvalidRequestError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
};

/**
 * The typed error for an answer: by the API's code, else by the status.
 * @param {number} status
 * @param {string} code
 * @param {string} message
 * @param {{field?: string|null, retryAfter?: number|null, requestId?: string|null}} [extra]
 * @returns {LonghaulError}
 */
export function errorFor(status, code, message, extra = {}) {
  const Cls = byCode[code] ?? byStatus[status] ?? (status >= 500 ? ServerError : LonghaulError);
  return new Cls(status, code, message, extra);
}
