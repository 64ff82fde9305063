/**
 * What `flow emit` and `flow wait-event` check before they connect, exactly as the native client
 * does (agent-image/native/flow.c): the event type, and `--payload` as JSON text.
 */

/** An event type: 1-64 of `[A-Za-z0-9._-]` (core's EVENT_TYPE_PATTERN; the client does not load core). */
export const isEventType = (type: string): boolean => /^[A-Za-z0-9._-]{1,64}$/.test(type);

const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * `text` without the whitespace between its tokens, or undefined when it is not one JSON value
 * (JSON.parse decides). The tokens travel as written (a number keeps its digits, a string its
 * escapes), and a request line never holds a raw newline.
 */
export const compactJson = (text: string): string | undefined => {
  try {
    JSON.parse(text);
  } catch {
    return undefined;
  }
  const parts: string[] = [];
  let from = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash: skip what it escapes
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (isSpace(c)) {
      if (i > from) parts.push(text.slice(from, i));
      from = i + 1;
    }
  }
  parts.push(text.slice(from));
  return parts.join("");
};
