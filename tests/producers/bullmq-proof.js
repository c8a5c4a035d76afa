#!/usr/bin/env node
'use strict';
// BullMQ 6.7.0's own side of tst_bullmqworker and tst_bullmqjobs: what a Node team's
// producers and workers do to a queue that once works, and what BullMQ's Queue and
// QueueEvents then see.
//
//   node bullmq-proof.js add --url URL --queue NAME --kind KIND [--tag T] [--count N]
//     mixed:   plain, delayed, prioritized, attempts-with-backoff, deduplicated (added
//              twice) and custom-id (added twice) jobs;
//     failing: jobs with attempts 3 and exponential backoff, attempts 2 and a fixed
//              backoff with jitter, and BullMQ's default of one attempt;
//     single:  one plain job; one-try: two jobs of one attempt each; bulk: --count
//              plain jobs, added a thousand at a time.
//     Prints { "jobs": [{ id, kind, attempts }], "reminders": distinct reminders }.
//
//   node bullmq-proof.js watch --url URL --queue NAME --finished N
//     Prints "ready" once QueueEvents listens, then collects the queue's events and the
//     workers getWorkers() lists until N jobs completed or failed for good (or 60 s),
//     and prints { events, workers, counts, jobs: [{ id, state, attemptsMade,
//     failedReason, processedBy, stacktrace }] }.
//
//   node bullmq-proof.js summary --url URL --queue NAME
//     { counts, processedBy: { worker: completed jobs } } of the whole queue.
//
//   node bullmq-proof.js inspect --url URL --queue NAME [--ids A,B] [--prefix P]
//     { counts, paused, states: { id: getState() }, keys: how many keys the queue has
//     besides its meta }.
//
//   node bullmq-proof.js pause|resume --url URL --queue NAME
//     queue.pause() or queue.resume(); prints { paused }.
//
//   node bullmq-proof.js retry --url URL --queue NAME
//     job.retry() on every failed job, as a Node team would; prints their ids.
//
//   node bullmq-proof.js work --url URL --queue NAME --partner URL --count N
//     A plain BullMQ Worker (concurrency 10, named "node-peer") that POSTs each job's data
//     to the partner with the send key as Idempotency-Key, until N jobs completed or
//     failed for good (--count 0: until the queue has nothing waiting, delayed or
//     active); prints { completed, failed }.

const { parseArgs } = require('node:util');
const { Queue, QueueEvents, Worker } = require('bullmq');
const { Redis } = require('ioredis');
const { scrub } = require('./common');

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' },
    queue: { type: 'string' },
    kind: { type: 'string', default: 'mixed' },
    tag: { type: 'string', default: 'p' },
    finished: { type: 'string', default: '0' },
    partner: { type: 'string' },
    count: { type: 'string', default: '0' },
    ids: { type: 'string', default: '' },
    prefix: { type: 'string', default: 'bull' },
  },
});

const connection = () => new Redis(values.url, { maxRetriesPerRequest: null });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function reminder(tag, i) {
  return {
    user_id: `${tag}-user-${i}`,
    reminder_id: `${tag}-rem-${i}`,
    scheduled_at: `2026-12-01T09:00:${String(i % 60).padStart(2, '0')}Z`,
    destination: `+1555${String(i).padStart(7, '0')}`,
    channel: 'sms',
    body: `Reminder ${i}`,
    event_id: `${tag}-evt-${i}`,
  };
}

async function add(queue) {
  const tag = values.tag;
  const jobs = [];
  let n = 0;
  const put = async (kind, opts = {}, again = false) => {
    const data = reminder(tag, again ? n : ++n);
    const job = await queue.add(kind, data, opts);
    jobs.push({ id: job.id, kind, attempts: opts.attempts ?? 0 });
  };
  if (values.kind === 'mixed') {
    for (let i = 0; i < 3; ++i) await put('plain');
    for (let i = 0; i < 2; ++i) await put('delayed', { delay: 1500 });
    for (let i = 0; i < 2; ++i) await put('prioritized', { priority: 5 });
    await put('backoff', { attempts: 3, backoff: { type: 'exponential', delay: 50 } });
    await put('deduplicated', { deduplication: { id: `${tag}-dedup` } });
    await put('deduplicated', { deduplication: { id: `${tag}-dedup` } }, true);
    await put('custom-id', { jobId: `${tag}-custom-42` });
    await put('custom-id', { jobId: `${tag}-custom-42` }, true);
  } else if (values.kind === 'bulk') {
    const count = Number(values.count);
    for (let from = 0; from < count; from += 1000) {
      const batch = Array.from({ length: Math.min(1000, count - from) }, () => ++n);
      const added = await queue.addBulk(batch.map((i) => ({ name: 'bulk', data: reminder(tag, i) })));
      jobs.push(...added.map((job) => ({ id: job.id, kind: 'bulk', attempts: 0 })));
    }
  } else if (values.kind === 'single') {
    await put('plain');
  } else if (values.kind === 'delayed') {
    await put('delayed', { delay: 1500 });
  } else if (values.kind === 'one-try') {
    for (let i = 0; i < 2; ++i) await put('one-try', { attempts: 1 });
  } else if (values.kind === 'failing') {
    await put('three-tries', { attempts: 3, backoff: { type: 'exponential', delay: 50 } });
    await put('two-tries', { attempts: 2, backoff: { type: 'fixed', delay: 40, jitter: 0.5 } });
    await put('one-try');
  } else {
    throw new Error(`unknown --kind ${values.kind}`);
  }
  const unique = [...new Map(jobs.map((job) => [job.id, job])).values()];
  return { jobs: unique, reminders: n };
}

async function watch(queue) {
  const events = new QueueEvents(values.queue, { connection: connection(), prefix: values.prefix });
  await events.waitUntilReady();
  const seen = { active: [], completed: [], failed: [], 'retries-exhausted': [], stalled: [], delayed: [] };
  for (const name of Object.keys(seen))
    events.on(name, ({ jobId }) => seen[name].push(jobId));
  const workers = new Set();
  const listWorkers = async () => {
    for (const worker of await queue.getWorkers())
      workers.add(worker.rawname); // name is the queue's; rawname the client's
  };
  const poll = setInterval(listWorkers, 100);
  // Also when a job goes active: its worker is connected then. A worker that drains a
  // few jobs quickly on a busy machine can come and go between two polls.
  events.on('active', () => listWorkers().catch(() => {}));
  process.stdout.write('ready\n');
  const wanted = Number(values.finished);
  const deadline = Date.now() + 60_000;
  const failedForGood = async () => (await queue.getJobCounts('failed')).failed;
  while (seen.completed.length + (await failedForGood()) < wanted && Date.now() < deadline)
    await sleep(50);
  await sleep(500); // the last events' way here
  clearInterval(poll);
  const ids = [...new Set([...seen.active, ...seen.completed, ...seen.failed])];
  const jobs = [];
  for (const id of ids) {
    const job = await queue.getJob(id);
    if (!job) continue;
    jobs.push({ id, name: job.name, state: await job.getState(), attemptsMade: job.attemptsMade,
                failedReason: job.failedReason ?? null, processedBy: job.processedBy ?? null,
                stacktrace: job.stacktrace ?? [] });
  }
  await events.close();
  return { events: seen, workers: [...workers], counts: await queue.getJobCounts(), jobs };
}

async function summary(queue) {
  const processedBy = {};
  for (const job of await queue.getCompleted(0, -1))
    processedBy[job.processedBy] = (processedBy[job.processedBy] || 0) + 1;
  return { counts: await queue.getJobCounts(), processedBy };
}

async function inspect(queue) {
  const states = {};
  for (const id of values.ids.split(',').filter((id) => id !== ''))
    states[id] = await queue.getJobState(id);
  // The queue's keys but its meta, which a Queue (this one too) writes as it starts.
  const client = connection();
  const keys = (await client.keys(`${values.prefix}:${values.queue}:*`)).filter((key) => !key.endsWith(':meta'));
  await client.quit();
  return { counts: await queue.getJobCounts(), paused: await queue.isPaused(), states, keys: keys.length };
}

async function pause(queue) {
  await queue.pause();
  return { paused: await queue.isPaused() };
}

async function resume(queue) {
  await queue.resume();
  return { paused: await queue.isPaused() };
}

async function retry(queue) {
  const failed = await queue.getFailed();
  for (const job of failed)
    await job.retry();
  return { retried: failed.map((job) => job.id) };
}

async function work(queue) {
  const target = Number(values.count);
  let completed = 0;
  let failed = 0;
  const worker = new Worker(values.queue, async (job) => {
    const d = job.data;
    const key = `${d.user_id}:${d.reminder_id}:${d.scheduled_at}`;
    const reply = await fetch(values.partner, { method: 'POST', body: JSON.stringify(d),
      headers: { 'content-type': 'application/json', 'idempotency-key': key } });
    if (!reply.ok)
      throw new Error(`HTTP ${reply.status}`);
    return 'sent';
  }, { connection: connection(), prefix: values.prefix, concurrency: 10, name: 'node-peer' });
  worker.on('completed', () => { ++completed; });
  worker.on('failed', (job) => { if (job && job.attemptsMade >= (job.opts.attempts || 1)) ++failed; });
  const done = async () => {
    if (target > 0)
      return completed + failed >= target;
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(counts).every((n) => n === 0);
  };
  const deadline = Date.now() + 120_000;
  while (!(await done()) && Date.now() < deadline)
    await sleep(50);
  await worker.close();
  return { completed, failed };
}

async function main() {
  const queue = new Queue(values.queue, { connection: connection(), prefix: values.prefix });
  const command = { add, watch, summary, inspect, pause, resume, retry, work }[positionals[0]];
  if (!command)
    throw new Error('say add, watch, summary, inspect, pause, resume, retry or work');
  const result = await command(queue);
  // Written before exit() ends the process: a write to a pipe finishes later.
  await new Promise((resolve) => process.stdout.write(JSON.stringify(result) + '\n', resolve));
  await queue.close();
}

main().then(() => process.exit(0)).catch((err) => {
  process.stderr.write(`bullmq-proof.js: ${scrub(err.message, values.url)}\n`);
  process.exit(1);
});
