#pragma once

#include "pages/page.h"

#include "operator/inspector.h"
#include "operator/redriverun.h"
#include "store/workerregistry.h"

#include <QPointer>

#include <optional>

class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QStackedWidget;
class QTableView;

namespace once::ui {

class DeadLettersModel;
class RedriveDialog;

// The dead letters, for an operator after a partner outage: what died, when and why (by
// error class, and in the last hour or day or a from-to range that picks the outage), the
// payload of each, and putting them back on the queue (redrive) at a rate the partner
// can take, with progress and a way to stop. Discarding is here too, with a confirmation,
// and the list as CSV or JSON for a ticket.
// With a broker's queue open the letters are the broker's (its dead-letter queue or
// stream), which the heading names; so do the redrive preview and the audit log.
class DeadLettersPage final : public Page
{
    Q_OBJECT

public:
    explicit DeadLettersPage(QWidget *parent = nullptr);
    ~DeadLettersPage() override;

    QString title() const override { return tr("Dead letters"); }
    void setSession(StoreSession *session) override;
    void refresh() override;

    // Shows every dead letter (filters cleared) and selects the one with this send key,
    // or says that there is none now (from an event's story).
    void showLetter(const QByteArray &sendKey);
    // Writes every dead letter that matches the filters (not only the rows shown) to path:
    // CSV for a .csv name, JSON otherwise. The store's reader writes it in the background,
    // a batch at a time, while the page shows its progress and offers to cancel;
    // exportFinished follows.
    void exportTo(const QString &path);
    // The died-between filter: from and to, to the second (both included), as if typed in
    // the zone the console shows and applied.
    void setTimeRange(const QDateTime &from, const QDateTime &to);
    // Shows the letters this search finds (ids, destination, error text, HTTP status; see
    // DeadLetterFilter::text), whatever the other filters were: from the Events page, where
    // the same search found no event.
    void search(const QString &text);

signals:
    // Open Event Story (or a double-click) on a letter with a send key: its event's story.
    void storyRequested(const QByteArray &sendKey);
    // count letters written to path, or error says why none were ("cancelled" for a cancel);
    // either way nothing but a complete file is ever under the name.
    void exportFinished(const QString &path, int count, const QString &error);

private:
    // The time filter's choices, by how far back they reach (0: all; CustomRange: the
    // from and to fields).
    static constexpr qint64 Hour = 3600 * 1000;
    static constexpr qint64 CustomRange = -1;
    // The redrive preview reads the partner's answers over this window.
    static constexpr qint64 ReadinessWindowMs = 60 * 1000;

    void buildUi();
    // Starts the list over for the filters now chosen, and counts anew.
    void reload();
    void requestCounts();
    void onLoaded(quint64 token, const QList<once::DeadLetter> &letters);
    void onPageLoaded();
    void onCounted(quint64 token, const once::DeadLetterCounts &counts);
    void onLetterLoaded(quint64 token, const once::DeadLetter &letter);
    void onFailed(quint64 token, const QString &error);
    void onSortClicked(int section);
    // The table's filter: the class and time chosen, in the order chosen.
    once::DeadLetterFilter displayFilter() const;
    // Every letter that matches the filters, for redrive all matching and the export.
    once::DeadLetterFilter matchingFilter() const;
    // The start of the idempotency window the preview warns about.
    static qint64 idempotencyWindowStartMs();
    QString selectedErrorClass() const;
    int selectedHttpStatus() const;
    qint64 timeWindowMs() const;
    bool customRange() const;
    // The filters chosen, into filter (time, search, status; not the class); false when a
    // custom range ends before it starts.
    bool applyTimeFilter(once::DeadLetterFilter *filter) const;
    void onTimeFilterChanged();
    // The typed from-to range, read and applied (Enter or Apply); a time that does not
    // read leaves the list as it was and says why in one line.
    void applyRange();
    // From the first to the last death among the selected letters, to the second.
    void useSelectionRange();
    // The range applied, in the from and to fields, in the zone the console shows now.
    void showRange();
    void applySearch();
    void selectLetterToShow();
    QList<once::DeadLetter> selectedLetters() const;

    void rebuildClassCombo();
    void applyClassFilter();
    void updateActions();
    void updateCounts();
    void updateDetails();
    void updateEmptyState();
    void setStatus(const QString &text, bool problem = false);
    void showPlace();
    // The audit log's text for an operation on these letters: with the broker's queue named.
    QString auditDetail(const QString &selection) const;

    void redriveSelected();
    void redriveAllMatching();
    void openRedriveDialog(const QList<once::DeadLetter> &letters, const QString &auditDetail);
    // "All matching": the store's counts and a sample, not every letter.
    void openMatchingRedriveDialog();
    void showDialog(RedriveDialog *dialog);
    void onReadinessLoaded(quint64 token, const QList<once::WorkerRecord> &workers,
                           const once::PartnerActivity &partner);
    // What the open dialog's letters would be: the picked ones, or every letter that
    // matches m_previewFilter (letters empty).
    once::RedriveOptions redriveOptions(const RedriveDialog &dialog) const;
    void onRedrivePreviewed(quint64 token, const once::RedrivePreview &preview);
    void startRedrive(const RedriveDialog &dialog);
    void cancelRedrive();
    void onRedriveProgress(quint64 token, const once::RedriveProgress &progress);
    void onRedriveFinished(quint64 token, const once::RedriveResult &result);
    void discardSelected();
    void onOperationFinished(quint64 token, bool ok, const QString &message);
    void copySendKeys();
    void openStory();
    void chooseExport();
    void cancelExport();
    void onExportProgress(quint64 token, int written, int total);
    void onExportFinished(quint64 token, int written, bool cancelled, const QString &error);

    QPointer<StoreSession> m_session;

    DeadLettersModel *m_model = nullptr;
    QTableView *m_table = nullptr;
    QComboBox *m_classCombo = nullptr;
    QComboBox *m_timeCombo = nullptr;
    QLineEdit *m_fromEdit = nullptr; // "diedFrom"
    QLineEdit *m_toEdit = nullptr;   // "diedTo"
    QLabel *m_rangeTo = nullptr;
    QPushButton *m_applyRangeButton = nullptr; // "applyRange"
    QAction *m_selectionRangeAction = nullptr; // "selectionRange"
    QLineEdit *m_searchEdit = nullptr;         // "deadLetterSearch"
    QComboBox *m_statusCombo = nullptr;        // "httpStatusFilter"
    QLabel *m_placeLabel = nullptr; // "deadLettersPlace"
    QLabel *m_countLabel = nullptr;
    QStackedWidget *m_stack = nullptr;
    QLabel *m_emptyLabel = nullptr;
    QLabel *m_detailsHeader = nullptr;
    QPlainTextEdit *m_details = nullptr;
    QProgressBar *m_progress = nullptr;
    QPushButton *m_cancelButton = nullptr;
    QProgressBar *m_exportProgress = nullptr;
    QPushButton *m_cancelExportButton = nullptr;
    QLabel *m_statusLabel = nullptr;
    QAction *m_redriveSelectedAction = nullptr;
    QAction *m_redriveAllAction = nullptr;
    QAction *m_discardAction = nullptr;
    QAction *m_copyKeysAction = nullptr;
    QAction *m_openStoryAction = nullptr;
    QAction *m_exportAction = nullptr;
    QPointer<RedriveDialog> m_redriveDialog;

    bool m_loaded = false; // at least one page since the session or the filters were set
    // What the filters apply: a range and a search as last applied, not as half typed.
    qint64 m_rangeSinceMs = 0;
    qint64 m_rangeUntilMs = 0;
    QString m_searchText;
    // The letters the filters take, by class, from the store (the class list and the count).
    once::DeadLetterCounts m_counts;
    bool m_countsKnown = false;
    quint64 m_countsToken = 0;
    // The selected letter's payload, which lists leave out: asked for on selection.
    QString m_detailsId;
    quint64 m_detailsToken = 0;
    // "Redrive all matching": the counts and the sample its preview waits for.
    once::DeadLetterFilter m_previewFilter;
    quint64 m_previewCountsToken = 0;
    quint64 m_previewSampleToken = 0;
    std::optional<once::DeadLetterCounts> m_previewCounts;
    std::optional<QList<once::DeadLetter>> m_previewSample;
    QString m_matchingDetail;
    // The export under way, 0 when none, and its file.
    quint64 m_exportToken = 0;
    QString m_exportPath;
    quint64 m_readinessToken = 0; // workers and partner, for the open redrive preview
    quint64 m_splitToken = 0;     // what the open preview's letters would be: sent, applied, expired
    QByteArray m_letterToShow;    // showLetter(): selected when the next load arrives
    quint64 m_redriveToken = 0;   // the redrive running now, 0 when none
    int m_redriveTotal = 0;
    QStringList m_redrivePicked; // the letters a redrive of picked ones takes (empty: all matching)
    quint64 m_discardToken = 0;
    int m_discardCount = 0;
    QStringList m_discarded;
};

} // namespace once::ui
