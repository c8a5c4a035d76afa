#pragma once

#include "operator/inspector.h"

#include <QString>

#include <memory>

namespace once::ui {
class StoreSession;
}

namespace once::bench {

// Drives the console's real models and pages over a large store, the way an operator's
// clicks would, through the console's own background reader (StoreSession), and prints
// one line per figure. Nothing here is a test: figures that miss their target say FAIL
// and the run goes on.
class ConsoleBench final
{
public:
    struct Options
    {
        QString storeUrl;
        QString onceBinary;         // for `once stats`
        int repeats = 3;            // runs of each cheap figure; the median is shown
        qint64 scrollBudgetMs = 180'000;
        qint64 slowPageMs = 5'000;  // a page slower than this ends the scroll
        int redriveSeconds = 0;     // 0: no redrive (it changes the store)
        int redriveRate = 100;      // letters a second
    };

    explicit ConsoleBench(Options options);
    ~ConsoleBench();

    // Whether every figure could be measured (met or not).
    bool run();

private:
    bool readSamples();
    bool openSession();
    void eventsFirstPage();
    void searches();
    void overview();
    void onceStats();
    void deadLettersPage();
    void inDoubtPage();
    void exportDeadLetters();
    void scroll();
    void redriveAllMatching();

    Options m_options;
    std::unique_ptr<ui::StoreSession> m_session;
    bool m_complete = true;
    // Picked from the store before the session opens.
    qint64 m_events = 0;
    qint64 m_deadLetters = 0;
    QString m_user;
    QString m_eventId;
    QString m_sendKey;
};

} // namespace once::bench
