// Placeholder until the native in-script client lands (issue 3); keeps `npm run build` uniform.
