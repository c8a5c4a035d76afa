// Prints, as one JSON object, the Lua body BullMQ sends to Redis for each of its
// commands (the package's dist/cjs/scripts, generated from dist/cjs/commands when it was
// built), keyed by file name ("moveToActive-11"): tst_bullmqscripts checks that once
// resolves the commands' includes into the very same bodies.
'use strict';
const fs = require('fs');
const path = require('path');

const scripts = path.join(path.dirname(require.resolve('bullmq/package.json')), 'dist', 'cjs', 'scripts');
const bodies = {};
for (const file of fs.readdirSync(scripts)) {
  if (!file.endsWith('.js') || file === 'index.js') continue;
  for (const value of Object.values(require(path.join(scripts, file)))) {
    if (value && typeof value.content === 'string' && typeof value.keys === 'number')
      bodies[`${value.name}-${value.keys}`] = value.content;
  }
}
process.stdout.write(JSON.stringify(bodies));
