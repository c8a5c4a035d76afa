#!/usr/bin/env node
'use strict';
// Adds reminders to a BullMQ queue as a Node team's producer does, with BullMQ's own
// Queue.addBulk, for once's broker tests:
//   node publish-bullmq.js --url redis://:PASS@HOST:PORT/0 --queue NAME --count N
//                          [--duplicate-every K] [--prefix P]
// Each message is one job named "reminder" whose data is the reminder; BullMQ gives it
// its id. A duplicate is the same data added again: another job, as after a producer's
// retry.

const { Queue } = require('bullmq');
const { Redis } = require('ioredis');
const { messages, run } = require('./common');

const BATCH = 500; // jobs per addBulk

async function publish(options) {
  const connection = new Redis(options.url, { maxRetriesPerRequest: null, retryStrategy: () => null });
  const queue = new Queue(options.target, { connection });
  try {
    let batch = [];
    const flush = async () => {
      if (batch.length === 0) return;
      await queue.addBulk(batch);
      batch = [];
    };
    for (const json of messages(options)) {
      batch.push({ name: 'reminder', data: JSON.parse(json) });
      if (batch.length >= BATCH) await flush();
    }
    await flush();
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

run('publish-bullmq.js', 'queue', publish);
