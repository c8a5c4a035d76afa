#!/usr/bin/env node
'use strict';
// Publishes reminders to an Amazon SQS queue as an ordinary @aws-sdk/client-sqs producer
// would, for once's broker tests:
//   node publish-sqs.js --url sqs://REGION/ACCOUNT/QUEUE[?endpoint=http://HOST:PORT] --queue QUEUE
//                       --count N [--duplicate-every K] [--prefix P]
// Each reminder is one message whose body is the reminder's JSON, sent ten to a
// SendMessageBatch; no message attributes (once uses SQS's MessageId then). Credentials
// come from the environment, as the SDK reads them. `once init --queue URL` creates the
// queue; this script only looks it up.

const { SQSClient, GetQueueUrlCommand, SendMessageBatchCommand } = require('@aws-sdk/client-sqs');
const { messages, run } = require('./common');

const BATCH = 10; // SQS's most per SendMessageBatch

function parseSqsUrl(text) {
  const url = new URL(text);
  const [account, queue] = url.pathname.split('/').filter((part) => part.length > 0);
  if (url.protocol !== 'sqs:' || !account || !queue)
    throw new Error(`not an SQS queue URL (sqs://REGION/ACCOUNT/QUEUE): ${text}`);
  return { region: url.hostname, account, queue, endpoint: url.searchParams.get('endpoint') || undefined };
}

async function publish(options) {
  const where = parseSqsUrl(options.url);
  if (where.queue !== options.target)
    throw new Error(`--queue ${options.target} is not the queue the URL names (${where.queue})`);
  const client = new SQSClient({ region: where.region, endpoint: where.endpoint, maxAttempts: 1 });
  try {
    let queueUrl;
    try {
      ({ QueueUrl: queueUrl } = await client.send(
        new GetQueueUrlCommand({ QueueName: where.queue, QueueOwnerAWSAccountId: where.account }),
      ));
    } catch (err) {
      throw new Error(`queue "${where.queue}" not found (${err.name}); create it first with: once init --queue '${options.url}'`);
    }
    let batch = [];
    const flush = async () => {
      if (batch.length === 0) return;
      const result = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: batch }));
      batch = [];
      if (result.Failed && result.Failed.length > 0)
        throw new Error(`SQS refused ${result.Failed.length} messages: ${result.Failed[0].Code} ${result.Failed[0].Message}`);
    };
    for (const json of messages(options)) {
      batch.push({ Id: String(batch.length), MessageBody: json });
      if (batch.length >= BATCH) await flush();
    }
    await flush();
  } finally {
    client.destroy();
  }
}

run('publish-sqs.js', 'queue', publish);
