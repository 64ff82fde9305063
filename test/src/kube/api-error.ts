// Kubernetes `Status` error bodies (k8s.io/apimachinery/pkg/api/errors): the shape every client
// reads, `{kind: "Status", status: "Failure", reason, code, message, details}`.

export type KubeObject = Record<string, unknown> & { metadata?: Record<string, unknown> };

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: { reason: string; message: string; field: string }[];
}

export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details: StatusDetails = {},
  ) {
    super(message);
  }

  toStatus(): KubeObject {
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}

/** `pods`, `flowhandlers.flowsvc.io`: how the apiserver names a resource in its messages. */
export const qualifiedResource = (group: string, plural: string): string => (group ? `${plural}.${group}` : plural);

export const notFound = (group: string, plural: string, name: string): ApiError =>
  new ApiError(404, "NotFound", `${qualifiedResource(group, plural)} "${name}" not found`, { name, group, kind: plural });

export const alreadyExists = (group: string, plural: string, name: string): ApiError =>
  new ApiError(409, "AlreadyExists", `${qualifiedResource(group, plural)} "${name}" already exists`, { name, group, kind: plural });

export const conflict = (group: string, plural: string, name: string): ApiError =>
  new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualifiedResource(group, plural)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, group, kind: plural },
  );

export interface InvalidTarget {
  group: string;
  kind: string;
  name: string;
}

/** 422 Invalid with one cause per field, as the apiserver's validation reports it. */
export const invalid = (target: InvalidTarget, causes: { field: string; message: string }[]): ApiError => {
  const what = target.group ? `${target.kind}.${target.group}` : target.kind;
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return new ApiError(422, "Invalid", `${what} "${target.name}" is invalid: ${text}`, {
    name: target.name,
    group: target.group,
    kind: target.kind,
    causes: causes.map((c) => ({ reason: "FieldValueInvalid", message: c.message, field: c.field })),
  });
};

export const badRequest = (message: string): ApiError => new ApiError(400, "BadRequest", message);

export const gone = (message: string): ApiError => new ApiError(410, "Expired", message);

export const methodNotAllowed = (): ApiError =>
  new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");

export const unsupportedMediaType = (type: string, accepted: string[]): ApiError =>
  new ApiError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`,
    {
      kind: type,
    },
  );
