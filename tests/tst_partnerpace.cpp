// PartnerPace, step by step on a clock the test moves: how a throttling answer cuts the
// pace, how seconds without one raise it, and how slow start ramps up after an outage.
#include "delivery/partnerpace.h"

#include <QTest>

using namespace once;

namespace {

// A lane with more to send than its pace lets through (up to 1,000 a second), from `from`
// to `to`: it asks every millisecond.
void pressOn(PartnerPace &pace, qint64 from, qint64 to)
{
    for (qint64 t = from; t < to; ++t)
        pace.take(t);
}

} // namespace

class PartnerPaceTest final : public QObject
{
    Q_OBJECT

private slots:
    void aThrottleHalvesThePaceOncePerChange();
    void secondsWithoutThrottlingRaiseThePaceUpToTheCeiling();
    void anIdleLaneKeepsItsPace();
    void theFloorHolds();
    void withoutACeilingTheFirstThrottleAdoptsWhatThePartnerAccepted();
    void slowStartDoublesUntilTheCeiling_data();
    void slowStartDoublesUntilTheCeiling();
    void slowStartEndsAtTheFirstThrottle();
    void slowStartLimitsTheSendsInFlight();
    void theBucketSpreadsThePaceOverItsSecond();
};

void PartnerPaceTest::aThrottleHalvesThePaceOncePerChange()
{
    PartnerPace pace(40);
    qint64 now = 1'000'000;
    QCOMPARE(pace.perSecond(now), 40.0);
    QVERIFY(pace.noteThrottled(now, now - 50));
    QCOMPARE(pace.perSecond(now), 20.0);
    QCOMPARE(pace.throttledAtMs(), now);
    // The rest of a burst already in flight: sent before the cut, it says nothing new.
    for (int i = 1; i <= 10; ++i)
        QVERIFY(!pace.noteThrottled(now + 300 + i, now - 10));
    QCOMPARE(pace.perSecond(now + 320), 20.0);
    QCOMPARE(pace.throttledAtMs(), now + 310);
    // Sent after the cut but answered within MinCutIntervalMs of it: not yet again.
    QVERIFY(!pace.noteThrottled(now + PartnerPace::MinCutIntervalMs - 1, now + 1));
    // Sent after the cut and answered later: the slower pace is still too fast.
    QVERIFY(pace.noteThrottled(now + 400, now + 350));
    QCOMPARE(pace.perSecond(now + 400), 10.0);
}

void PartnerPaceTest::secondsWithoutThrottlingRaiseThePaceUpToTheCeiling()
{
    PartnerPace pace(40); // steps of 2 a second
    const qint64 cut = 1'000'000;
    pace.noteThrottled(cut, cut);
    pressOn(pace, cut, cut + 999);
    QCOMPARE(pace.perSecond(cut + 999), 20.0);
    QCOMPARE(pace.perSecond(cut + 1000), 22.0);
    pressOn(pace, cut + 1000, cut + 5500);
    QCOMPARE(pace.perSecond(cut + 5500), 30.0);
    pressOn(pace, cut + 5500, cut + 60'000);
    QCOMPARE(pace.perSecond(cut + 60'000), 40.0); // never above the ceiling
    QVERIFY(!pace.slowStart(cut + 60'000));
}

void PartnerPaceTest::anIdleLaneKeepsItsPace()
{
    PartnerPace pace(40);
    const qint64 cut = 1'000'000;
    pace.noteThrottled(cut, cut);
    QCOMPARE(pace.perSecond(cut + 60'000), 20.0);
    // Sending below its pace (one request a second) is not pressing on it either.
    for (qint64 t = cut; t < cut + 60'000; t += 1000)
        QVERIFY(pace.take(t));
    QCOMPARE(pace.perSecond(cut + 60'000), 20.0);
    pressOn(pace, cut + 60'000, cut + 61'000);
    QCOMPARE(pace.perSecond(cut + 61'000), 22.0);
}

void PartnerPaceTest::theFloorHolds()
{
    PartnerPace pace(4);
    qint64 now = 1'000'000;
    for (int i = 0; i < 10; ++i, now += 300)
        pace.noteThrottled(now, now);
    QCOMPARE(pace.perSecond(now), PartnerPace::FloorPerSecond);
}

void PartnerPaceTest::withoutACeilingTheFirstThrottleAdoptsWhatThePartnerAccepted()
{
    PartnerPace pace;
    qint64 now = 1'000'000;
    QCOMPARE(pace.perSecond(now), 0.0); // no limit
    // 30 accepted over the last second, some of them longer ago than that.
    for (int i = 0; i < 10; ++i)
        pace.noteAccepted(now - 1500 + i);
    for (int i = 0; i < 30; ++i)
        pace.noteAccepted(now - 900 + i * 30);
    QVERIFY(pace.noteThrottled(now, now - 5));
    QCOMPARE(pace.perSecond(now), 30.0);
    // Then AIMD: halved by the next throttle, raised by a twentieth of the pace after it.
    QVERIFY(pace.noteThrottled(now + 500, now + 400));
    QCOMPARE(pace.perSecond(now + 500), 15.0);
    pressOn(pace, now + 500, now + 1500);
    QCOMPARE(pace.perSecond(now + 1500), 16.0);
    // After minutes pressing on it without throttling it is unlimited again.
    pressOn(pace, now + 1500, now + 500 + 200'000);
    QCOMPARE(pace.perSecond(now + 500 + 200'000), 0.0);
}

void PartnerPaceTest::slowStartDoublesUntilTheCeiling_data()
{
    QTest::addColumn<double>("ceiling");
    QTest::addColumn<QList<double>>("paces"); // at the close, then each second after it

    QTest::newRow("20/s") << 20.0 << QList<double>{2, 4, 8, 16, 20, 20};
    QTest::newRow("300/s") << 300.0 << QList<double>{30, 60, 120, 240, 300};
    QTest::newRow("5/s") << 5.0 << QList<double>{1, 2, 4, 5};
    QTest::newRow("none") << 0.0 << QList<double>{2, 4, 8, 16, 32, 64, 128, 256, 512, 0};
}

void PartnerPaceTest::slowStartDoublesUntilTheCeiling()
{
    QFETCH(double, ceiling);
    QFETCH(QList<double>, paces);
    PartnerPace pace(ceiling);
    const qint64 closed = 1'000'000;
    pace.restartSlow(closed);
    for (int second = 0; second < paces.size(); ++second) {
        const qint64 at = closed + second * 1000 + 10;
        QVERIFY2(pace.perSecond(at) == paces.at(second),
                 qPrintable(QStringLiteral("second %1: %2/s, expected %3/s")
                                .arg(second)
                                .arg(pace.perSecond(at))
                                .arg(paces.at(second))));
        // Ramping until the ceiling, or without one until it is unlimited again.
        QCOMPARE(pace.slowStart(at), ceiling > 0 ? paces.at(second) < ceiling : paces.at(second) > 0);
        pressOn(pace, at, closed + (second + 1) * 1000);
    }
}

void PartnerPaceTest::slowStartEndsAtTheFirstThrottle()
{
    PartnerPace pace;
    const qint64 closed = 1'000'000;
    pace.restartSlow(closed);
    pressOn(pace, closed, closed + 4100);
    QCOMPARE(pace.perSecond(closed + 4100), 32.0);
    QVERIFY(pace.noteThrottled(closed + 4200, closed + 4150));
    QCOMPARE(pace.perSecond(closed + 4200), 16.0);
    QVERIFY(!pace.slowStart(closed + 4200));
    pressOn(pace, closed + 4200, closed + 5200);
    QCOMPARE(pace.perSecond(closed + 5200), 17.0); // then additive
}

void PartnerPaceTest::slowStartLimitsTheSendsInFlight()
{
    PartnerPace pace;
    const qint64 now = 1'000'000;
    QCOMPARE(pace.concurrency(now, 16), 16);
    pace.restartSlow(now);
    QCOMPARE(pace.concurrency(now, 16), 2);
    pressOn(pace, now, now + 3000);
    QCOMPARE(pace.concurrency(now + 3000, 16), 16); // 16/s
    QCOMPARE(pace.concurrency(now + 3000, 8), 8);
}

void PartnerPaceTest::theBucketSpreadsThePaceOverItsSecond()
{
    PartnerPace pace(20);
    const qint64 start = 1'000'000;
    int sent = 0;
    qint64 firstHalf = 0;
    for (qint64 t = start; t < start + 1000; t += 5) {
        if (pace.take(t)) {
            ++sent;
            if (t < start + 500)
                ++firstHalf;
        }
    }
    // 20 a second, spread: about half of them in each half second, never all at once.
    QVERIFY2(sent >= 19 && sent <= 22, qPrintable(QString::number(sent)));
    QVERIFY2(firstHalf <= 13, qPrintable(QString::number(firstHalf)));
    // After slow start's first request, the next waits for its turn.
    pace.restartSlow(start + 2000);
    QVERIFY(!pace.take(start + 2000));
    QVERIFY(pace.waitMs(start + 2000) >= 400);
}

QTEST_GUILESS_MAIN(PartnerPaceTest)
#include "tst_partnerpace.moc"
