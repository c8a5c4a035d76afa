'use strict';
// The peer of `once worker`, written as a Node.js team would write it: a BullMQ worker
// that, for each reminder job, claims its send key with Redis SET NX (a key already
// claimed is a duplicate: no POST), then POSTs the reminder with the key as its
// Idempotency-Key over undici keep-alive connections, and completes the job.
//
//   PEER_REDIS_URL=redis://... node worker.js --partner URL --expect N [--concurrency 50]
//       [--queue reminders] [--timeout 600]
//
// Stops once N jobs have completed and prints {"completed", "duplicates",
// "failed_attempts", "seconds", "per_second"}. The clock starts when the worker is
// connected and about to take its first job, and stops at the Nth completion: BullMQ has
// then recorded it in Redis, as once's ledger has recorded its outcome.

const { Worker } = require('bullmq');
const IORedis = require('ioredis');
const { Pool } = require('undici');
const { UsageError, parseOptions, redisUrl, run, sendKey, wholeNumber } = require('./common');

run('worker', async () => {
  const options = parseOptions({ partner: '', expect: '', concurrency: '50', queue: 'reminders', timeout: '600' });
  let partner;
  try {
    partner = new URL(options.partner);
  } catch {
    throw new UsageError('--partner must be the partner\'s URL, e.g. http://127.0.0.1:8080/reminders');
  }
  const expect = wholeNumber(options.expect, '--expect', 1);
  const concurrency = wholeNumber(options.concurrency, '--concurrency', 1);
  const timeoutSeconds = wholeNumber(options.timeout, '--timeout', 1);

  const url = redisUrl();
  // BullMQ wants no per-command retry limit on its own connections.
  const connection = new IORedis(url, { maxRetriesPerRequest: null });
  const claims = new IORedis(url);
  // One keep-alive connection per job in flight, so that no send waits for a socket.
  const pool = new Pool(partner.origin, { connections: concurrency });
  const path = partner.pathname + partner.search;

  let duplicates = 0;
  async function deliver(job) {
    const reminder = job.data;
    const key = sendKey(reminder);
    const claim = `sendkey:${key}`;
    if ((await claims.set(claim, '1', 'NX')) === null) {
      duplicates += 1;
      return null;
    }
    try {
      const { statusCode, body } = await pool.request({
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(reminder),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const reply = await body.text();
      if (statusCode < 200 || statusCode > 299)
        throw new Error(`the partner answered HTTP ${statusCode}`);
      return JSON.parse(reply).request_id;
    } catch (err) {
      // Released so that BullMQ's next attempt sends again, with the same key: a partner
      // that did apply the first one answers the repeat without a second effect.
      await claims.del(claim);
      throw err;
    }
  }

  const worker = new Worker(options.queue, deliver, {
    connection,
    concurrency,
    autorun: false,
    // The last few for inspection; Redis does not keep every reminder ever sent.
    removeOnComplete: { count: 1000 },
    removeOnFail: { count: 5000 },
  });
  worker.on('error', (err) => console.error(`worker: ${err.message}`));
  let failedAttempts = 0;
  worker.on('failed', (job, err) => {
    failedAttempts += 1;
    if (failedAttempts <= 5)
      console.error(`worker: job ${job ? job.id : '?'} failed: ${err.message}`);
  });
  let completed = 0;
  const allCompleted = new Promise((resolve) => {
    worker.on('completed', () => {
      completed += 1;
      if (completed === expect)
        resolve();
    });
  });
  let timer;
  const timedOut = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`only ${completed} of ${expect} jobs completed in ${timeoutSeconds} s`)),
      timeoutSeconds * 1000);
  });

  await worker.waitUntilReady();
  await claims.ping();
  const started = process.hrtime.bigint();
  const running = worker.run();
  try {
    await Promise.race([allCompleted, timedOut]);
  } finally {
    clearTimeout(timer);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;

  await worker.close();
  await running;
  await pool.close();
  await claims.quit();
  await connection.quit();
  console.log(JSON.stringify({
    completed, duplicates, failed_attempts: failedAttempts, seconds, per_second: completed / seconds,
  }));
});
