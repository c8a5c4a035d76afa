#pragma once

#include "operator/inspector.h"
#include "operator/redriverun.h"
#include "session/redrivereadiness.h"

#include <QDialog>
#include <QMap>

class QFormLayout;
class QCheckBox;
class QLabel;
class QProgressBar;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTreeWidget;

namespace once::ui {

// What the preview shows about the letters a redrive takes: counted by the store for
// "all matching" (however many), or from the letters themselves when picked one by one.
struct RedriveSelection
{
    qint64 count = 0;
    QMap<QString, qint64> byClass;
    qint64 redrivenBefore = 0;
    qint64 outsideWindow = 0;       // first sent before the idempotency window began
    qint64 credentialsRefused = 0;  // rejected for our credentials: the partner's outage, not theirs
    QList<once::DeadLetter> sample; // the first few, in the order they go

    static RedriveSelection of(const QList<once::DeadLetter> &letters, qint64 windowStartMs);
    static RedriveSelection of(const once::DeadLetterCounts &counts, const QString &errorClass,
                             const QList<once::DeadLetter> &sample);
};

// The preview and confirmation of a redrive: how many dead letters go back on the queue,
// a sample of them, how many already died again after an earlier redrive, a warning for
// those first sent longer ago than the partner keeps idempotency keys, whether a worker
// would send them and the partner answers now (setReadiness, which the page keeps
// refreshing while the preview is open), what the store says a redrive would do now
// (setSplit: sent, already applied, expired), the ceiling rate, a canary and a stop rule,
// and the operator's reason for the audit log. Pressing Redrive is the operator's decision
// (redriveRequested); nothing else asks again. The dialog then stays to show the run live
// (setProgress: its pace and why, what became of the letters) until it ends or the
// operator hides it; the page keeps its own progress bar either way.
class RedriveDialog final : public QDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RedriveDialog)

public:
    static constexpr int SampleSize = 20;

    // auditDetail is what the audit log will say about the selection ("selected 12").
    RedriveDialog(const QList<once::DeadLetter> &letters, const QString &auditDetail,
                  int idempotencyWindowHours, int defaultRatePerSecond, QWidget *parent = nullptr);
    // Letters that are not all at hand (every one that matches a filter): the preview
    // only. letters() is then empty, and the page redrives by the filter.
    RedriveDialog(const RedriveSelection &preview, const QString &auditDetail, int idempotencyWindowHours,
                  int defaultRatePerSecond, QWidget *parent = nullptr);
    ~RedriveDialog() override;

    const QList<once::DeadLetter> &letters() const { return m_letters; }
    QString auditDetail() const { return m_auditDetail; }
    int letterCount() const { return int(m_preview.count); }
    int sampleCount() const;
    // Letters that were redriven before and died again.
    int redrivenBeforeCount() const { return int(m_preview.redrivenBefore); }
    // Letters first sent longer ago than the partner keeps idempotency keys.
    int outsideIdempotencyWindowCount() const { return int(m_preview.outsideWindow); }
    bool showsIdempotencyWarning() const;
    // Names the queue they go back on, when it is a broker's ("RabbitMQ queue reminders").
    void setQueueDescription(const QString &queue);
    QString queueDescription() const;
    int ratePerSecond() const;
    void setRatePerSecond(int rate);
    // What the operator typed, trimmed; empty when nothing.
    QString reason() const;
    void setReason(const QString &reason);
    // Who would send them now; until the first call the preview says it is checking.
    void setReadiness(const RedriveReadiness &readiness);
    void setReadinessError(const QString &error);
    bool readinessKnown() const { return m_readinessKnown; }
    QString workersText() const;
    QString partnerText() const;
    // The warning shown about workers and the partner; empty when none is.
    QString readinessWarning() const;
    QPushButton *redriveButton() const { return m_redriveButton; }

    // What the store says the letters would come to now; "checking…" until then.
    void setSplit(const once::RedrivePreview &preview);
    QString splitText() const;
    bool includeExpired() const;
    void setIncludeExpired(bool include);
    int canary() const;
    void setCanary(int letters);
    int stopAfterFailures() const;
    void setStopAfterFailures(int failures);
    // The run as it goes: the dialog shows it in place of its choices.
    void setProgress(const once::RedriveProgress &progress);
    QString paceText() const;
    bool isRunning() const { return m_running; }

signals:
    void redriveRequested();
    void cancelRequested();

private:
    void startRunning();
    void buildUi(int idempotencyWindowHours, int defaultRatePerSecond);
    void updateEstimate();

    QList<once::DeadLetter> m_letters;
    RedriveSelection m_preview;
    QString m_auditDetail;
    QLabel *m_headline = nullptr;
    QLabel *m_queue = nullptr;
    QFormLayout *m_facts = nullptr;
    QSpinBox *m_rate = nullptr;
    QLabel *m_estimate = nullptr;
    QLabel *m_windowWarning = nullptr;
    QLabel *m_workers = nullptr;
    QLabel *m_partner = nullptr;
    QLabel *m_readinessWarning = nullptr;
    bool m_readinessKnown = false;
    QLineEdit *m_reason = nullptr;
    QTreeWidget *m_sample = nullptr;
    QPushButton *m_redriveButton = nullptr;
    QPushButton *m_closeButton = nullptr;
    QPushButton *m_cancelButton = nullptr; // cancels the dialog, or the redrive once it runs
    QLabel *m_split = nullptr;
    QLabel *m_expiredNames = nullptr;
    QCheckBox *m_includeExpired = nullptr;
    QSpinBox *m_canary = nullptr;
    QSpinBox *m_stopAfterFailures = nullptr;
    QWidget *m_choices = nullptr;
    QWidget *m_runView = nullptr;
    QProgressBar *m_runBar = nullptr;
    QLabel *m_pace = nullptr;
    QLabel *m_runCounts = nullptr;
    qint64 m_expiredCount = 0;
    bool m_running = false;
};

} // namespace once::ui
