/**
 * The protocol transcript (agent-image/protocol/transcript.json; docs/internals.md, "Protocol
 * transcript"): the in-script socket protocol as exact frames, one case per call a speaker makes.
 * Every speaker (the native client, the Node client, the TypeScript, Python, Go and Rust SDKs) replays
 * the cases it has a call for against a TranscriptPeer and must send exactly the recorded
 * requests and make of the recorded answers what the case expects.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const TRANSCRIPT_PATH = fileURLToPath(new URL("../../protocol/transcript.json", import.meta.url));

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface Frame {
  /**
   * The request line the speaker must send, byte for byte: JSON.stringify of this object, or this
   * text where an object cannot say it (a number spelt 2.50, as `flow emit --payload` keeps it).
   */
  readonly request: JsonObject | string;
  /** The answer line the agent sends (JSON.stringify + newline); null: no answer, the run parks. */
  readonly answer: JsonObject | null;
}

/** The speaker is still waiting when the last request was not answered (the agent ends it). */
export interface Pending {
  readonly pending: true;
}

export interface CliOutcome {
  readonly exit: number;
  readonly stdout: string;
  readonly stderr: string;
}

export type SdkOutcome =
  { readonly returns: Json } | { readonly throws: { readonly code: string; readonly exit?: number; readonly message?: string } };

/** An SDK call, the same in every language: options are the TypeScript options object, the Python keyword arguments (the Go and Rust drivers map them). */
export interface SdkCall {
  /** step, stepFn, sleep, waitSignal, emit, callNode, callGraph, callDefinition, state.get, state.set, state.delete, state.list. */
  readonly call: string;
  readonly args: readonly Json[];
  readonly options?: JsonObject;
  /** stepFn's function: returns this value, or throws an error with this message. */
  readonly fn?: { readonly returns: Json } | { readonly throws: string };
}

export interface TranscriptCase {
  readonly name: string;
  /** The `flow` words after the program name, for the native and the Node client. */
  readonly cli?: readonly string[];
  /** What the CLI call reads on stdin (`-` arguments); empty without it. */
  readonly stdin?: string;
  /** Files the CLI call reads, created in its working directory (name -> text). */
  readonly files?: Readonly<Record<string, string>>;
  readonly sdk?: SdkCall;
  readonly frames: readonly Frame[];
  readonly expect: { readonly cli?: CliOutcome | Pending; readonly sdk?: SdkOutcome | Pending };
}

export interface Transcript {
  readonly protocol: number;
  /** The inode the answers call the capture pipe (never the speaker's stdout in these tests). */
  readonly capture_ino: number;
  readonly cases: readonly TranscriptCase[];
}

export const loadTranscript = (path = TRANSCRIPT_PATH): Transcript => JSON.parse(readFileSync(path, "utf8")) as Transcript;

/** The exact request line a frame records (without its newline). */
export const requestLine = (frame: Frame): string => (typeof frame.request === "string" ? frame.request : JSON.stringify(frame.request));

export const isPending = (outcome: object | undefined): outcome is Pending => outcome !== undefined && "pending" in outcome;
