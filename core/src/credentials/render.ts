/**
 * What a credential turns into (spec, "Credential", the kinds table): the raw value a job gets as an
 * environment variable, the auth an http request gets, and the strings a masker hides. Pure
 * functions: http and connector nodes call renderHttpAuth at dispatch, the claim calls
 * credentialEnvValue, the run maskers call credentialMaskValues.
 */
import { FlowError } from "../errors.js";
import { CLI_KIND_SPELLINGS, type CredentialValue } from "./kinds.js";

/** The literal a url-token credential replaces in a node's `url`. */
export const URL_TOKEN_PLACEHOLDER = "{credential}";

/** The raw secret injected as an environment variable: the token, the key, or `username:password`. */
export const credentialEnvValue = (c: CredentialValue): string => {
  switch (c.kind) {
    case "bearer":
    case "url_token":
      return c.token;
    case "api_key":
      return c.value;
    case "basic":
      return `${c.username}:${c.password}`;
  }
};

/** Base64 of the UTF-8 bytes (RFC 7617 with charset UTF-8), without Buffer: core does no I/O. */
const base64Utf8 = (text: string): string => {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
};

/** `Authorization: Basic ...`'s value. */
export const basicAuthValue = (username: string, password: string): string => `Basic ${base64Utf8(`${username}:${password}`)}`;

/**
 * Every string that carries the secret and may be echoed: the raw value, the password alone, and
 * the header value exactly as sent (a Basic header is base64, which no mask of the raw text would
 * catch). Other transformations are not masked (spec, Secret rule 4).
 */
export const credentialMaskValues = (c: CredentialValue): string[] => {
  switch (c.kind) {
    case "basic":
      return [credentialEnvValue(c), c.password, basicAuthValue(c.username, c.password).slice("Basic ".length)];
    default:
      return [credentialEnvValue(c)];
  }
};

/** An http request before and after auth: the node's url and its explicit `headers:`. */
export interface HttpRequestParts {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

const hasHeader = (headers: Readonly<Record<string, string>>, name: string): boolean =>
  Object.keys(headers).some((h) => h.toLowerCase() === name.toLowerCase());

/** Adds `name: value` unless the node set that header itself: an explicit `headers:` entry wins (spec, Credential rule 2). */
const withHeader = (req: HttpRequestParts, name: string, value: string): HttpRequestParts =>
  hasHeader(req.headers, name) ? req : { url: req.url, headers: { ...req.headers, [name]: value } };

/**
 * The request with the credential's auth, by the kind it was stored as (spec, Credential rule 4):
 * bearer -> `Authorization: Bearer`, api-key -> its header, basic -> `Authorization: Basic`,
 * url-token -> every `{credential}` in the url replaced by the token, percent-encoded as one URL
 * component (a `/`, `?` or `#` in a token cannot change where the request goes). A url-token
 * credential whose url has no `{credential}` is refused: the request would go out without auth.
 * `name` is the credential's name, for the message.
 */
export const renderHttpAuth = (name: string, c: CredentialValue, req: HttpRequestParts): HttpRequestParts => {
  switch (c.kind) {
    case "bearer":
      return withHeader(req, "Authorization", `Bearer ${c.token}`);
    case "api_key":
      return withHeader(req, c.header, c.value);
    case "basic":
      return withHeader(req, "Authorization", basicAuthValue(c.username, c.password));
    case "url_token":
      if (!req.url.includes(URL_TOKEN_PLACEHOLDER))
        throw new FlowError(
          "invalid_argument",
          `credential ${name} is a ${CLI_KIND_SPELLINGS.url_token} credential, and the url has no ${URL_TOKEN_PLACEHOLDER} to replace with it: nothing was sent`,
          { details: { field: "url" } },
        );
      return { url: req.url.split(URL_TOKEN_PLACEHOLDER).join(encodeURIComponent(c.token)), headers: req.headers };
  }
};
