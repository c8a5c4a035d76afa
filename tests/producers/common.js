'use strict';
// What publish-amqp.js and publish-redis.js share: options, the reminder JSON, the
// summary line, and one-line errors that never show the broker password.

const { parseArgs } = require('node:util');

// Parses the command line. target is the option naming the queue ("queue" or "stream").
// Returns { url, target, count, duplicateEvery, prefix }; throws UsageError.
function parseOptions(argv, target) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        [target]: { type: 'string' },
        count: { type: 'string' },
        'duplicate-every': { type: 'string' },
        prefix: { type: 'string', default: '' },
      },
    }));
  } catch (err) {
    throw new UsageError(err.message.split('\n')[0]);
  }
  for (const required of ['url', target, 'count']) {
    if (values[required] === undefined || values[required] === '')
      throw new UsageError(`--${required} is required`);
  }
  const count = wholeNumber(values.count, '--count', 0);
  const duplicateEvery =
    values['duplicate-every'] === undefined ? 0 : wholeNumber(values['duplicate-every'], '--duplicate-every', 1);
  return { url: values.url, target: values[target], count, duplicateEvery, prefix: values.prefix };
}

function wholeNumber(text, option, minimum) {
  if (!/^\d+$/.test(text) || Number(text) < minimum || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`${option} must be a whole number of at least ${minimum}, not "${text}"`);
  return Number(text);
}

class UsageError extends Error {}

const pad = (n, width) => String(n).padStart(width, '0');

// Reminder number i (1-based) as the JSON once parses (core/model/reminder.cpp). A duplicate
// publish of i must carry these exact bytes: the send key is user + reminder + time.
function reminderJson(i, prefix) {
  const minute = Math.floor(i / 60) % 60;
  const second = i % 60;
  return JSON.stringify({
    user_id: `${prefix}user-${i % 997}`,
    reminder_id: `${prefix}rem-${i}`,
    scheduled_at: `2026-12-01T09:${pad(minute, 2)}:${pad(second, 2)}+00:00`,
    destination: `+1555${pad(i % 10_000_000, 7)}`,
    channel: 'sms',
    body: `Reminder ${i}`,
    event_id: `${prefix}evt-${i}`,
  });
}

// The message bodies in publish order: reminders 1..count, and right after every
// duplicateEvery-th one, the same reminder again (as a producer that retried after a
// lost acknowledgement would; the caller gives each message a new message id).
function* messages(options) {
  for (let i = 1; i <= options.count; i++) {
    const json = reminderJson(i, options.prefix);
    yield json;
    if (options.duplicateEvery > 0 && i % options.duplicateEvery === 0) yield json;
  }
}

function summary(options) {
  const twice = options.duplicateEvery > 0 ? Math.floor(options.count / options.duplicateEvery) : 0;
  return { total: options.count + twice, reminders: options.count, twice };
}

function summaryLine(options) {
  const { total, reminders, twice } = summary(options);
  return `published ${total} messages (${reminders} reminders, ${twice} twice)`;
}

// The URL with its password replaced, for messages.
function redactUrl(url) {
  return String(url).replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*:)[^@/]*@/i, '$1***@');
}

// Removes the password from any text (an error message may quote the URL).
function scrub(text, url) {
  let out = String(text);
  out = out.split(String(url)).join(redactUrl(url));
  const match = /^[a-z][a-z0-9+.-]*:\/\/[^:@/]*:([^@/]*)@/i.exec(String(url));
  if (match && match[1].length > 0) {
    let decoded = match[1];
    try {
      decoded = decodeURIComponent(match[1]);
    } catch {}
    for (const secret of new Set([match[1], decoded])) if (secret.length > 0) out = out.split(secret).join('***');
  }
  return out;
}

// Runs main(options); prints its result line and exits 0, or prints one error line and
// exits 1. (Writes to a pipe or file are synchronous on Linux, so exiting loses nothing.)
async function run(script, target, main) {
  let options;
  try {
    options = parseOptions(process.argv.slice(2), target);
  } catch (err) {
    process.stderr.write(
      `${script}: ${err.message} (usage: node ${script} --url URL --${target} NAME --count N ` +
        '[--duplicate-every K] [--prefix P])\n',
    );
    process.exit(1);
  }
  try {
    await main(options);
    process.stdout.write(`${summaryLine(options)}\n`);
  } catch (err) {
    const message = String(err && err.message ? err.message : err).replace(/\s*\n\s*/g, ' ');
    process.stderr.write(`${script}: ${scrub(message, options.url)}\n`);
    // Exits at once: a half-open client socket must not keep the process alive.
    process.exit(1);
  }
  process.exit(0);
}

module.exports = { messages, reminderJson, redactUrl, run, scrub, summary };
