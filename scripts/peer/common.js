'use strict';
// What produce.js and worker.js share: the Redis URL, options, and the send key.

const { parseArgs } = require('node:util');

class UsageError extends Error {}

// The password is in the URL: it comes through the environment, which `ps` does not show.
function redisUrl() {
  const url = process.env.PEER_REDIS_URL;
  if (!url)
    throw new UsageError('PEER_REDIS_URL must name the Redis server (redis://:PASSWORD@HOST:PORT/0)');
  return url;
}

// options: { name: default } (every option takes a value). Returns { name: value }.
function parseOptions(options) {
  const spec = {};
  for (const [name, value] of Object.entries(options))
    spec[name] = { type: 'string', default: value };
  try {
    return parseArgs({ options: spec, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError(err.message.split('\n')[0]);
  }
}

function wholeNumber(text, option, minimum) {
  if (!/^\d+$/.test(text) || Number(text) < minimum || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`${option} must be a whole number of at least ${minimum}, not "${text}"`);
  return Number(text);
}

// once's key (core/model/reminder.cpp): user, reminder and the time it is due, so that a
// reminder published twice, or rescheduled, is told apart from a repeat. The ids are
// percent-encoded so that ':' only ever separates.
function sendKey(reminder) {
  return `${encodeURIComponent(reminder.user_id)}:${encodeURIComponent(reminder.reminder_id)}:` +
    new Date(reminder.scheduled_at).toISOString();
}

// Runs main, turning its errors into one line and an exit status (2: usage).
function run(what, main) {
  main().catch((err) => {
    console.error(`${what}: ${err.message.split('\n')[0]}`);
    process.exit(err instanceof UsageError ? 2 : 1);
  });
}

module.exports = { UsageError, redisUrl, parseOptions, wholeNumber, sendKey, run };
