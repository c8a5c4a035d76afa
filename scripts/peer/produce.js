'use strict';
// Adds --count reminder jobs to the BullMQ queue --queue, in addBulk chunks, and prints
// {"produced": N, "seconds": S}. The reminders have the shape `once bench` enqueues, each
// due at the moment it is added.
//
//   PEER_REDIS_URL=redis://... node produce.js --count N [--queue reminders]

const { Queue } = require('bullmq');
const IORedis = require('ioredis');
const { parseOptions, redisUrl, run, wholeNumber } = require('./common');

// Big enough that round trips do not matter, small enough that one addBulk's pipeline
// does not hold Redis up for long.
const Chunk = 1000;

run('produce', async () => {
  const options = parseOptions({ count: '20000', queue: 'reminders' });
  const count = wholeNumber(options.count, '--count', 1);
  const connection = new IORedis(redisUrl(), { maxRetriesPerRequest: null });
  const queue = new Queue(options.queue, { connection });
  // Keeps two runs' keys apart, as once bench's nonce does.
  const nonce = Math.floor(Math.random() * 2 ** 30).toString(36);
  const started = process.hrtime.bigint();
  for (let first = 0; first < count; first += Chunk) {
    const now = new Date().toISOString();
    const jobs = [];
    for (let n = first; n < Math.min(count, first + Chunk); ++n) {
      jobs.push({
        name: 'reminder',
        data: {
          user_id: `u${n % 10007}`,
          reminder_id: `r${nonce}-${n}`,
          scheduled_at: now,
          destination: `+1555${String(n % 10_000_000).padStart(7, '0')}`,
          channel: 'sms',
          event_id: `bench-${nonce}-${n}`,
          body: 'Your appointment is tomorrow at 10:00',
        },
        // A failed send is tried again later; the claim is released before that (worker.js).
        opts: { attempts: 5, backoff: { type: 'exponential', delay: 1000 } },
      });
    }
    await queue.addBulk(jobs);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(JSON.stringify({ produced: count, seconds }));
  await queue.close();
  await connection.quit();
});
