#!/usr/bin/env node
'use strict';
// Puts jobs in every state of a BullMQ queue with BullMQ itself, then prints what
// BullMQ's Queue says of it, for tst_bullmqqueues to compare with what once reads:
//   node bullmq-states.js --url redis://:PASS@HOST:PORT/0 --queue NAME [--prefix bull] [--pause]
// A different number in each state, so that no count can pass for another: three
// completed and two failed (by a Worker), one active (a Worker that never finishes it: it
// stays active until its lock runs out), four waiting, five delayed by an hour, six
// prioritized; with --pause the queue is paused at the end. Prints one JSON object:
// { "counts": getJobCounts(), "paused": isPaused(), "version": meta's version }.

const { parseArgs } = require('node:util');
const { Queue, Worker } = require('bullmq');
const { Redis } = require('ioredis');
const { scrub } = require('./common');

async function waitFor(check, what) {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    queue: { type: 'string' },
    prefix: { type: 'string', default: 'bull' },
    pause: { type: 'boolean', default: false },
  },
});

async function main() {
  const connection = () => new Redis(values.url, { maxRetriesPerRequest: null });
  const options = { connection: connection(), prefix: values.prefix };
  const queue = new Queue(values.queue, options);
  const reminder = (i) => ({ user_id: `u-${i}`, reminder_id: `r-${i}`, scheduled_at: '2026-12-01T09:00:00Z',
                             destination: `+1555000000${i}`, body: `Reminder ${i}` });

  // Finished: a worker completes three and fails two (no attempts left).
  await queue.addBulk([
    ...[1, 2, 3].map((i) => ({ name: 'done', data: reminder(i) })),
    ...[4, 5].map((i) => ({ name: 'broken', data: reminder(i), opts: { attempts: 1 } })),
  ]);
  const finisher = new Worker(values.queue, async (job) => {
    if (job.name === 'broken')
      throw new Error('the partner said 400');
    return 'sent';
  }, { connection: connection(), prefix: values.prefix });
  await waitFor(async () => {
    const counts = await queue.getJobCounts('completed', 'failed');
    return counts.completed === 3 && counts.failed === 2;
  }, 'three completed and two failed');
  await finisher.close();

  // Active: a worker takes one and never finishes it.
  await queue.add('stuck', reminder(6));
  let taken;
  const taking = new Promise((resolve) => { taken = resolve; });
  const holder = new Worker(values.queue, () => { taken(); return new Promise(() => {}); },
                            { connection: connection(), prefix: values.prefix, lockDuration: 60_000 });
  await taking;
  await holder.close(true); // without waiting for the job: it stays active

  // Waiting, delayed, prioritized.
  const range = (from, count) => Array.from({ length: count }, (_, k) => from + k);
  await queue.addBulk(range(7, 4).map((i) => ({ name: 'plain', data: reminder(i) })));
  await queue.addBulk(range(11, 5).map((i) => ({ name: 'later', data: reminder(i), opts: { delay: 3_600_000 } })));
  await queue.addBulk(range(16, 6).map((i) => ({ name: 'urgent', data: reminder(i), opts: { priority: 3 } })));
  if (values.pause)
    await queue.pause();

  const counts = await queue.getJobCounts();
  const paused = await queue.isPaused();
  const version = await options.connection.hget(`${values.prefix}:${values.queue}:meta`, 'version');
  process.stdout.write(JSON.stringify({ counts, paused, version }));
  await queue.close();
  await options.connection.quit();
}

main().then(() => process.exit(0), (err) => {
  const message = scrub(String((err && err.message) || err), values.url);
  process.stderr.write(`bullmq-states.js: ${message.split('\n')[0]}\n`);
  process.exit(1);
});
