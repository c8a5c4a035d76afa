// KafkaOffsets: what a Kafka consumer may commit while sends finish in any order. A commit
// says "everything below this offset is settled": one that ran ahead of a send still in
// flight would lose that message if the worker crashed, and one that never moved would
// redeliver everything.
#include "queues/kafka/kafkaoffsets.h"

#include <QTest>

using namespace once;

class KafkaOffsetsTest final : public QObject
{
    Q_OBJECT

private slots:
    void nothingTakenCommitsNothing()
    {
        KafkaOffsets offsets;
        QCOMPARE(offsets.commitPoint(), qint64(-1));
        QCOMPARE(offsets.uncommitted(), qint64(-1));
    }

    void theCommitStopsAtTheLowestOpenOffset()
    {
        KafkaOffsets offsets;
        for (qint64 offset = 10; offset < 15; ++offset)
            offsets.take(offset);
        QCOMPARE(offsets.open(), 5);
        QCOMPARE(offsets.commitPoint(), qint64(10)); // 10 is still in flight
        offsets.settle(12);
        offsets.settle(13);
        QCOMPARE(offsets.commitPoint(), qint64(10)); // settled out of order: no further yet
        offsets.settle(10);
        QCOMPARE(offsets.commitPoint(), qint64(11));
        offsets.settle(11);
        QCOMPARE(offsets.commitPoint(), qint64(14));
        offsets.settle(14);
        QCOMPARE(offsets.commitPoint(), qint64(15)); // all settled: one after the highest
        QCOMPARE(offsets.open(), 0);
    }

    void aCommitIsOnlyAskedForWhenItMovesOn()
    {
        KafkaOffsets offsets;
        offsets.take(0);
        offsets.take(1);
        offsets.settle(1);
        QCOMPARE(offsets.uncommitted(), qint64(0)); // nothing below 0: the same as the group's start
        offsets.committed(0);
        QCOMPARE(offsets.uncommitted(), qint64(-1));
        offsets.settle(0);
        QCOMPARE(offsets.uncommitted(), qint64(2));
        offsets.committed(2);
        QCOMPARE(offsets.uncommitted(), qint64(-1));
        // A late report of an older commit does not move it back.
        offsets.committed(1);
        offsets.take(2);
        offsets.settle(2);
        QCOMPARE(offsets.uncommitted(), qint64(3));
    }

    void anOffsetTakenAgainIsOpenUntilSettledAgain()
    {
        KafkaOffsets offsets;
        offsets.take(5);
        offsets.settle(5);
        QVERIFY(!offsets.isOpen(5));
        offsets.take(5); // fetched again after the partition came back from the last commit
        QVERIFY(offsets.isOpen(5));
        QCOMPARE(offsets.commitPoint(), qint64(5));
    }

    // What a consumer that lost its partition remembers of it: which offsets it settled,
    // to skip them when a refused commit brings them back, and which were still open
    // (abandoned mid-send), to take again.
    void whatWasSettledIsKnownAfterwards()
    {
        KafkaOffsets offsets;
        QVERIFY(!offsets.wasSettled(0));
        QCOMPARE(offsets.next(), qint64(-1));
        for (qint64 offset = 10; offset < 15; ++offset)
            offsets.take(offset);
        offsets.settle(10);
        offsets.settle(11);
        offsets.settle(13);
        QVERIFY(offsets.wasSettled(10));
        QVERIFY(offsets.wasSettled(11));
        QVERIFY(!offsets.wasSettled(12)); // open: abandoned, taken again by the next owner
        QVERIFY(offsets.wasSettled(13));
        QVERIFY(!offsets.wasSettled(14));
        QVERIFY(!offsets.wasSettled(9));  // before what this consumer took
        QVERIFY(!offsets.wasSettled(15)); // after it
        QCOMPARE(offsets.next(), qint64(15));
    }
};

QTEST_GUILESS_MAIN(KafkaOffsetsTest)
#include "tst_kafkaoffsets.moc"
