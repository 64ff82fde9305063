import { connect } from "node:net";

/**
 * Sends `text` as is on a new connection to `baseUrl` and reads until the server closes it. For
 * answers a client library would hide or race: Node's own 431, and a 413 the server sends on
 * Content-Length alone (it closes once it answered, so a client still writing the body may get
 * EPIPE before it reads the answer; declare the size and send no body).
 */
export const rawRequest = (baseUrl: string, text: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(baseUrl);
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let out = "";
    socket.setEncoding("utf8").on("data", (d: string) => (out += d));
    socket.on("error", reject);
    socket.on("close", () => resolve(out));
  });

/** The status code and JSON body of a raw HTTP/1.1 answer. */
export const parseRawAnswer = <T = unknown>(answer: string): { status: number; body: T } => ({
  status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? 0),
  body: JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as T,
});
