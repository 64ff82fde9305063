// A TCP port given as text (an environment variable, a flag): the one rule for every port setting
// (flow server's FLOWSVC_PORT / --port, the deployables' FLOWSVC_PORT, FLOWSVC_HEALTH_PORT and
// FLOWSVC_METRICS_PORT). Decimal digits only: `Number()` alone would take "0x1F90", " 8080 ", "1e3"
// and "" as ports.
import { wholeNumberSetting } from "./number-setting.js";

/** The refusal, the same for every port setting. */
export const PORT_MESSAGE = "must be a port number: 0-65535 in decimal digits (0: any free port)";

/** A port setting's text to its number; absent: `fallback`. */
export const portSetting = (fallback: number) => wholeNumberSetting({ min: 0, max: 65535, fallback, message: PORT_MESSAGE });
